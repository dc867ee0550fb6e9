"""Referenced kptrs to kernel structs against Linux: tests/verifier_objects/task_kptr.o's
xdp_task_kptr keeps tasks (bpf_task_from_pid, bpf_task_from_vpid) and cgroups
(bpf_cgroup_from_id) in an ARRAY value's __kptr fields with bpf_kptr_xchg, reads them
through the field's plain load and bpf_task_acquire/bpf_cgroup_acquire, takes them out
and releases them. The same jobs under BPF_PROG_TEST_RUN
on Linux and on both pyxdp engines must give the same verdicts and the same map contents,
a task whose process exited while the map held it included (its pid stays readable, its
lookup by pid is NULL). The other programs' verdicts are tests/test_verifier.py's
(tests/kernel/test_verifier_kernel.py re-measures them)."""

from __future__ import annotations

import os
import struct
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.prog import jit_available
from pyxdp.vm.task_kfuncs import cgroup_mounts

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[1] / "verifier_objects" / "task_kptr.o"
TASK, TAKE, PEEK, CGROUP, TAKE_CGROUP, TASK_VPID, PEEK_CGROUP = range(7)
UPDATE = -1  # not a run: user space writes the slot's element


def _jobs(child: int, cgid: int) -> list[tuple[int, int, int]]:
    """(id, slot, op) of each run; the child is killed and reaped after the first 10."""
    me = os.getpid()
    return [(me, 0, TASK), (2, 0, TASK), (0, 0, PEEK), (0, 0, TAKE), (0, 0, TAKE),
            (0x3FFF_FFFF, 1, TASK), (me, 1, TASK), (0, 1, PEEK), (child, 2, TASK),
            (0, 2, PEEK),
            # the child is gone now
            (0, 2, PEEK), (child, 3, TASK), (0, 2, TAKE), (0, 2, PEEK),
            (cgid, 0, CGROUP), (1, 0, CGROUP), (0, 0, TAKE_CGROUP), (0, 0, TAKE_CGROUP),
            (1 << 40, 3, CGROUP), (cgid, 3, CGROUP),
            (0, 9, TASK), (0, 0, 7),
            (cgid, 1, CGROUP), (0, 1, PEEK_CGROUP), (0x3FFF_FFFF, 1, TASK_VPID),
            (me, 1, TASK_VPID), (0, 1, TAKE), (0, 3, PEEK_CGROUP),
            # user space updates element 0 (UPDATE): the fields' task and cgroup are
            # released, the fields empty after
            (me, 0, TASK), (cgid, 0, CGROUP), (0, 0, UPDATE), (0, 0, TAKE),
            (0, 0, TAKE_CGROUP)]


def _run(coll: Collection, jobs: list[tuple[int, int, int]],
         child: subprocess.Popen[bytes]) -> tuple[list[int], list[dict[str, int]]]:
    prog = coll.programs["xdp_task_kptr"]
    verdicts = []
    for n, job in enumerate(jobs):
        if n == 10:
            child.kill()
            child.wait()
        if job[2] == UPDATE:
            coll.maps["held"][job[1]] = {"task": 0, "cgrp": 0, "seen": 7, "extra": 7}
            continue
        verdicts.append(int(prog.test_run(struct.pack("<QII", *job) + bytes(48)).retval))
    return verdicts, [dict(coll.maps["held"][i]) for i in range(4)]


def test_task_and_cgroup_kptrs_match_linux() -> None:
    root = cgroup_mounts().get(0)
    if root is None:
        pytest.skip("no cgroup v2 hierarchy mounted")
    own = Path(root + Path("/proc/self/cgroup").read_text().split("::", 1)[1].strip())
    spec = load_collection_spec(OBJ)
    spec = replace(spec, programs={"xdp_task_kptr": spec.programs["xdp_task_kptr"]})
    results = {}
    for backend, engine in (("kernel", ""), ("userspace", "interp"), ("userspace", "jit")):
        if engine == "jit" and not jit_available():
            continue
        child = subprocess.Popen(["sleep", "60"])
        try:
            jobs = _jobs(child.pid, own.stat().st_ino)
            kw = {"engine": engine} if engine else {}
            with Collection(spec, backend, **kw) as coll:
                results[engine or backend] = _run(coll, jobs, child)
        finally:
            child.kill()
            child.wait()
        # the values hold each job's pids: the child's differs per round
        verdicts, held = results[engine or backend]
        for v in held:
            v["seen"] = -1 if v["seen"] == child.pid else v["seen"]
            v["extra"] = -1 if v["extra"] == child.pid else v["extra"]
    want = results.pop("kernel")
    # what Linux did: the old task's pid seen, kthreadd's, the child's after it exited
    assert want[0][:5] == [2, 3, 3, 3, 2] and want[0][5] == 1
    assert want[0][9:14] == [3, 3, 1, 3, 2]
    assert want[1][2] == {"task": 0, "cgrp": 0, "seen": -1, "extra": -1}
    assert want[0][22:28] == [2, 3, 1, 3, 3, 3]  # bpf_task_from_vpid, bpf_cgroup_acquire
    assert want[1][3]["extra"] == own.stat().st_ino
    assert want[0][28:] == [2, 2, 2, 2]  # the update emptied both fields
    assert want[1][0] == {"task": 0, "cgrp": 0, "seen": 7, "extra": 7}
    for engine, got in results.items():
        assert got == want, engine
