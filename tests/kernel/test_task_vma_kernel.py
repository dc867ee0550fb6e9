"""The task VMA iterator (bpf_iter_task_vma_new/_next/_destroy) against Linux: one XDP
program walks the VMAs of a child process started for the test (a sleep, stopped
afterwards) from address 0 - their number, the sums of vm_start, vm_end and vm_flags, the
number of file mappings and the sum of their vm_pgoff - and from an address inside its
third VMA (the first VMA given and how many), and asks for kthreadd's (no mm: -ENOENT,
then NULL). Linux under BPF_PROG_TEST_RUN and both pyxdp engines must write the same
map."""

from __future__ import annotations

import errno
import functools
import subprocess
import time
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.net.prog import jit_available
from pyxdp.testing.kfunclab import hash_put, hash_values, member_off
from pyxdp.testing.verifier_cases import VerifierCase

pytestmark = pytest.mark.kernel

_off = functools.partial(member_off, "vm_area_struct")  # a struct vm_area_struct member's offset

NKEYS = 10
M32 = 0xFFFF_FFFF


def _add(slot: int, reg: str) -> str:
    return f"r1 = *(u64 *)(r10 - {slot})\nr1 += {reg}\n*(u64 *)(r10 - {slot}) = r1\n"


def _program(pid: int, addr: int) -> str:
    start, end, flags, pgoff, file = (_off(m) for m in ("vm_start", "vm_end", "vm_flags",
                                                        "vm_pgoff", "vm_file"))
    it = "r1 = r10\nr1 += -24\n"
    sums = (32, 40, 48, 56, 64, 72)  # stack slots: count, starts, ends, flags, files, pgoffs
    a = f"r1 = {pid}\ncall KFUNC(bpf_task_from_pid)\nif r0 == 0 goto kt\nr6 = r0\n"
    a += "".join(f"*(u64 *)(r10 - {s}) = 0\n" for s in sums)
    a += it + "r2 = r6\nr3 = 0\ncall KFUNC(bpf_iter_task_vma_new)\n"
    a += "loop:\n" + it + "call KFUNC(bpf_iter_task_vma_next)\nif r0 == 0 goto done\n"
    a += "r7 = r0\n" + _add(32, "1")
    for slot, off in ((40, start), (48, end), (56, flags)):
        a += f"r2 = *(u64 *)(r7 + {off})\n" + _add(slot, "r2")
    a += f"r2 = *(u64 *)(r7 + {file})\nif r2 == 0 goto loop\n" + _add(64, "1")
    a += f"r2 = *(u64 *)(r7 + {pgoff})\n" + _add(72, "r2") + "goto loop\n"
    a += "done:\n" + it + "call KFUNC(bpf_iter_task_vma_destroy)\n"
    for key, slot in enumerate(sums):
        a += f"r9 = *(u64 *)(r10 - {slot})\n" + hash_put(key, "r9")
    a += it + f"r2 = r6\nr3 = {addr} ll\ncall KFUNC(bpf_iter_task_vma_new)\nr8 = 0\n"
    a += it + "call KFUNC(bpf_iter_task_vma_next)\nif r0 == 0 goto from_done\n"
    a += f"r9 = *(u64 *)(r0 + {start})\n" + hash_put(6, "r9") + "r8 = 1\n"
    a += "from:\n" + it + "call KFUNC(bpf_iter_task_vma_next)\nif r0 == 0 goto from_done\n"
    a += "r8 += 1\ngoto from\nfrom_done:\n" + hash_put(7, "r8")
    a += it + "call KFUNC(bpf_iter_task_vma_destroy)\nr1 = r6\ncall KFUNC(bpf_task_release)\n"
    a += "kt:\nr1 = 2\ncall KFUNC(bpf_task_from_pid)\nif r0 == 0 goto out\nr6 = r0\n"
    a += it + "r2 = r6\nr3 = 0\ncall KFUNC(bpf_iter_task_vma_new)\nr9 = r0\n" + hash_put(8, "r9")
    a += it + "call KFUNC(bpf_iter_task_vma_next)\nr9 = r0\n" + hash_put(9, "r9")
    a += it + "call KFUNC(bpf_iter_task_vma_destroy)\nr1 = r6\ncall KFUNC(bpf_task_release)\n"
    return a + "out:\nr0 = 2\nexit"


def _wait_asleep(pid: int) -> None:
    """Until ``pid`` is in interruptible sleep (state S), at most 5 s."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat[stat.rindex(")") + 2] == "S":
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} never went to sleep")


def test_task_vma_iterator_matches_linux() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        # Popen returns once execve is past the point of no return, while the loader may
        # still be mapping sleep: its mappings are final once it sleeps in nanosleep.
        _wait_asleep(child.pid)
        third = int(Path(f"/proc/{child.pid}/maps").read_text().splitlines()[2].split("-")[0],
                    16)
        spec = VerifierCase("task_vma", _program(child.pid, third + 1), None).spec()
        with Collection(spec, "kernel") as kern:
            assert kern.programs["task_vma"].test_run(bytes(64)).retval == 2
            want = hash_values(kern, range(NKEYS))
        lines = Path(f"/proc/{child.pid}/maps").read_text().splitlines()
        vmas = [ln for ln in lines if not ln.endswith("[vsyscall]")]
        assert want[0] == len(vmas) and want[6] == third and want[7] == len(vmas) - 2
        assert (want[8] or 0) & M32 == -errno.ENOENT & M32 and want[9] == 0
        for engine in ["interp", "jit"] if jit_available() else ["interp"]:
            with Collection(spec, "userspace", engine=engine) as user:
                assert user.programs["task_vma"].test_run(bytes(64)).retval == 2
                assert hash_values(user, range(NKEYS)) == want, engine
    finally:
        child.kill()
        child.wait()
