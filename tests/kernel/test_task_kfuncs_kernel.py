"""The task and cgroup kfuncs against Linux: one XDP program looks up this test process by
pid and reads its pid, tgid, comm, flags, prio, its real parent's pid and grandparent's
comm and its cgroup v2 id through task->cgroups->dfl_cgrp->kn->id; looks up a cgroup
made for the test (two levels below the v2 root) by id, reads its id and level, asks
whether the task is under it and under its root ancestor, takes its level-1 ancestor;
and takes the task's cgroup of a v1 hierarchy. Linux under BPF_PROG_TEST_RUN and both
pyxdp engines must write the same map."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.net.prog import jit_available
from pyxdp.testing.kfunclab import hash_put, hash_values, member_off
from pyxdp.testing.verifier_cases import VerifierCase
from pyxdp.vm.task_kfuncs import cgroup_mounts

pytestmark = pytest.mark.kernel

NKEYS = 16


def _program(pid: int, cgid: int, hierarchy: int) -> str:
    t = {m: member_off("task_struct", m) for m in ("pid", "tgid", "comm", "flags", "prio",
                                                   "real_parent", "cgroups")}
    dfl, kn = member_off("css_set", "dfl_cgrp"), member_off("cgroup", "kn")
    level = member_off("cgroup", "level")
    kid = member_off("kernfs_node", "id")
    rp = f"r9 = *(u64 *)(r6 + {t['real_parent']})\n"
    cg_id = f"r9 = *(u64 *)(r9 + {kn})\nr9 = *(u64 *)(r9 + {kid})\n"
    a = f"r1 = {pid}\ncall KFUNC(bpf_task_from_pid)\nif r0 == 0 goto out\nr6 = r0\n"
    for key, (off, size) in enumerate(((t["pid"], 32), (t["tgid"], 32), (t["comm"], 64),
                                       (t["comm"] + 8, 64), (t["flags"], 32),
                                       (t["prio"], 32))):
        a += f"r9 = *(u{size} *)(r6 + {off})\n" + hash_put(key, "r9")
    a += rp + f"r9 = *(u32 *)(r9 + {t['pid']})\n" + hash_put(6, "r9")
    a += rp + f"r9 = *(u64 *)(r9 + {t['real_parent']})\nr9 = *(u64 *)(r9 + {t['comm']})\n"
    a += hash_put(7, "r9")
    a += f"r9 = *(u64 *)(r6 + {t['cgroups']})\nr9 = *(u64 *)(r9 + {dfl})\n" + cg_id
    a += hash_put(8, "r9")
    a += f"r1 = {cgid} ll\ncall KFUNC(bpf_cgroup_from_id)\nif r0 == 0 goto cg1\nr7 = r0\n"
    a += "r9 = r7\n" + cg_id + hash_put(9, "r9")
    a += f"r9 = *(u32 *)(r7 + {level})\n" + hash_put(10, "r9")
    a += "r1 = r6\nr2 = r7\ncall KFUNC(bpf_task_under_cgroup)\nr9 = r0\n" + hash_put(11, "r9")
    a += "r1 = r7\nr2 = 1\ncall KFUNC(bpf_cgroup_ancestor)\nif r0 == 0 goto rel7\nr8 = r0\n"
    a += "r9 = r8\n" + cg_id + hash_put(12, "r9") + "r1 = r8\ncall KFUNC(bpf_cgroup_release)\n"
    a += "r1 = r7\nr2 = 0\ncall KFUNC(bpf_cgroup_ancestor)\nif r0 == 0 goto rel7\nr8 = r0\n"
    a += "r1 = r6\nr2 = r8\ncall KFUNC(bpf_task_under_cgroup)\nr9 = r0\n" + hash_put(13, "r9")
    a += "r1 = r8\ncall KFUNC(bpf_cgroup_release)\n"
    a += "rel7:\nr1 = r7\ncall KFUNC(bpf_cgroup_release)\n"
    a += f"cg1:\nr1 = r6\nr2 = {hierarchy}\ncall KFUNC(bpf_task_get_cgroup1)\n"
    a += "if r0 == 0 goto rel\nr7 = r0\nr9 = r7\n" + cg_id + hash_put(14, "r9")
    a += f"r9 = *(u32 *)(r7 + {level})\n" + hash_put(15, "r9")
    a += "r1 = r7\ncall KFUNC(bpf_cgroup_release)\n"
    return a + "rel:\nr1 = r6\ncall KFUNC(bpf_task_release)\nout:\nr0 = 2\nexit"


@pytest.fixture
def child_cgroup() -> Iterator[Path]:
    """A cgroup two levels below the v2 root, removed afterwards."""
    root = cgroup_mounts().get(0)
    if root is None:
        pytest.skip("no cgroup v2 hierarchy mounted")
    top = Path(root) / f"pyxdp-test-{os.getpid()}"
    (top / "sub").mkdir(parents=True)
    try:
        yield top / "sub"
    finally:
        (top / "sub").rmdir()
        top.rmdir()


def _v1_hierarchy() -> int:
    """A v1 hierarchy this process is in below its root, else any (1 on a v2-only host:
    none, so NULL from both)."""
    lines = [ln.split(":", 2) for ln in Path("/proc/self/cgroup").read_text().splitlines()]
    v1 = [(int(h), p) for h, _, p in lines if int(h)]
    return next((h for h, p in v1 if p != "/"), v1[0][0] if v1 else 1)


def test_task_and_cgroup_kfuncs_match_linux(child_cgroup: Path) -> None:
    hierarchy = _v1_hierarchy()
    spec = VerifierCase("task_cgroup", _program(os.getpid(), child_cgroup.stat().st_ino,
                                                hierarchy), None).spec()
    engines = ["interp", "jit"] if jit_available() else ["interp"]
    with Collection(spec, "kernel") as kern:
        assert kern.programs["task_cgroup"].test_run(bytes(64)).retval == 2
        want = hash_values(kern, range(NKEYS))
    assert want[0] == os.getpid() and want[9] == child_cgroup.stat().st_ino
    assert want[10] == 2 and want[11] == 0 and want[13] == 1  # under the root, not the child
    for engine in engines:
        with Collection(spec, "userspace", engine=engine) as user:
            assert user.programs["task_cgroup"].test_run(bytes(64)).retval == 2
            assert hash_values(user, range(NKEYS)) == want, engine


def _iter_program(tid: int) -> str:
    """The threads of ``tid``'s group from ``tid`` on (PROC_THREADS): their number, the
    sums of their pids and tgids, the first and last pid; the first task of ALL_PROCS and
    of ALL_THREADS (pid and comm: the idle task)."""
    pid, tgid, comm = (member_off("task_struct", m) for m in ("pid", "tgid", "comm"))
    it = "r1 = r10\nr1 += -40\n"
    a = f"r1 = {tid}\ncall KFUNC(bpf_task_from_pid)\nif r0 == 0 goto all\nr6 = r0\n"
    a += it + "r2 = r6\nr3 = 2\ncall KFUNC(bpf_iter_task_new)\n"
    a += "r7 = 0\nr8 = 0\n*(u64 *)(r10 - 48) = 0\n*(u64 *)(r10 - 56) = 0\n"
    a += it + "call KFUNC(bpf_iter_task_next)\nif r0 == 0 goto done\n"
    a += f"r8 = *(u32 *)(r0 + {pid})\nr9 = *(u32 *)(r0 + {tgid})\n"
    a += "*(u64 *)(r10 - 48) = r9\n*(u64 *)(r10 - 56) = r8\n" + hash_put(0, "r8") + "r7 = 1\n"
    a += "loop:\n" + it + "call KFUNC(bpf_iter_task_next)\nif r0 == 0 goto done\nr7 += 1\n"
    a += f"r1 = *(u32 *)(r0 + {pid})\nr8 += r1\nr2 = *(u32 *)(r0 + {tgid})\n"
    a += "r3 = *(u64 *)(r10 - 48)\nr3 += r2\n*(u64 *)(r10 - 48) = r3\n"
    a += "*(u64 *)(r10 - 56) = r1\ngoto loop\n"
    a += "done:\n" + it + "call KFUNC(bpf_iter_task_destroy)\n"
    a += hash_put(1, "r7") + hash_put(2, "r8") + "r9 = *(u64 *)(r10 - 48)\n" + hash_put(3, "r9")
    a += "r9 = *(u64 *)(r10 - 56)\n" + hash_put(4, "r9")
    a += "r1 = r6\ncall KFUNC(bpf_task_release)\nall:\n"
    for key, flags in ((5, 0), (7, 1)):
        a += it + f"r2 = 0\nr3 = {flags}\ncall KFUNC(bpf_iter_task_new)\n"
        a += it + f"call KFUNC(bpf_iter_task_next)\nif r0 == 0 goto d{key}\nr6 = r0\n"
        a += f"r9 = *(u32 *)(r6 + {pid})\n" + hash_put(key, "r9")
        a += f"r9 = *(u64 *)(r6 + {comm})\n" + hash_put(key + 1, "r9")
        a += f"d{key}:\n" + it + "call KFUNC(bpf_iter_task_destroy)\n"
    return a + "r0 = 2\nexit"


def test_task_iterator_matches_linux() -> None:
    """A child with three more threads, walked from its second thread."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import threading, time\n"
         "for _ in range(3): threading.Thread(target=time.sleep, args=(30,), daemon=True)"
         ".start()\nprint('up', flush=True)\ntime.sleep(30)"], stdout=subprocess.PIPE,
        text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "up"
        tids = sorted(int(t) for t in os.listdir(f"/proc/{child.pid}/task"))
        assert len(tids) == 4
        spec = VerifierCase("task_iter", _iter_program(tids[1]), None).spec()
        engines = ["interp", "jit"] if jit_available() else ["interp"]
        with Collection(spec, "kernel") as kern:
            assert kern.programs["task_iter"].test_run(bytes(64)).retval == 2
            want = hash_values(kern, range(9))
        # from the given thread to the group's last (__next_thread); the idle task first
        assert want[0] == tids[1] and want[1] == 3 and want[2] == sum(tids[1:])
        assert want[4] == tids[3] and want[5] == 0
        for engine in engines:
            with Collection(spec, "userspace", engine=engine) as user:
                assert user.programs["task_iter"].test_run(bytes(64)).retval == 2
                assert hash_values(user, range(9)) == want, engine
    finally:
        child.kill()
        child.wait()


def _css_walks(top: int, leaf: int) -> str:
    """The ids of the first four cgroups css iterators give: pre-order and post-order from
    ``top`` (keys 0-3, 4-7), ancestors up from ``leaf`` (8-11); bpf_iter_css_new's return
    for a bad flag (12) and what that iterator's next gives (13)."""
    kn, kid = member_off("cgroup", "kn"), member_off("kernfs_node", "id")
    it = "r1 = r10\nr1 += -40\n"
    a = ""
    for w, (start, flags) in enumerate(((top, 2), (top, 3), (leaf, 4), (top, 1))):
        a += f"r1 = {start} ll\ncall KFUNC(bpf_cgroup_from_id)\nif r0 == 0 goto out{w}\n"
        a += "r6 = r0\n" + it + f"r2 = r6\nr3 = {flags}\ncall KFUNC(bpf_iter_css_new)\n"
        if flags == 1:
            a += "r9 = r0\n" + hash_put(12, "r9")
        for key in range(4 * w, 4 * w + (4 if flags != 1 else 1)):
            a += it + f"call KFUNC(bpf_iter_css_next)\nif r0 == 0 goto done{w}\n"
            a += f"r9 = *(u64 *)(r0 + 0)\nr9 = *(u64 *)(r9 + {kn})\nr9 = *(u64 *)(r9 + {kid})\n"
            a += hash_put(key if flags != 1 else 13, "r9")
        a += f"done{w}:\n" + it + "call KFUNC(bpf_iter_css_destroy)\n"
        a += f"r1 = r6\ncall KFUNC(bpf_cgroup_release)\nout{w}:\n"
    return a + "r0 = 2\nexit"


def test_css_iterator_matches_linux(child_cgroup: Path) -> None:
    """Below the test's cgroup (top): sub, then b, then b/x made in turn. Pre-order and
    post-order from top (children oldest first), ancestors up from b/x, a bad flag."""
    top = child_cgroup.parent
    (top / "b").mkdir()
    (top / "b" / "x").mkdir()
    try:
        ids = {n: (top / n).stat().st_ino for n in (".", "sub", "b", "b/x")}
        spec = VerifierCase("css_iter", _css_walks(ids["."], ids["b/x"]), None).spec()
        engines = ["interp", "jit"] if jit_available() else ["interp"]
        with Collection(spec, "kernel") as kern:
            assert kern.programs["css_iter"].test_run(bytes(64)).retval == 2
            want = hash_values(kern, range(NKEYS))
        assert [want[k] for k in range(4)] == [ids[n] for n in (".", "sub", "b", "b/x")]
        assert want[12] == -errno.EINVAL & 0xFFFF_FFFF and want[13] is None
        for engine in engines:
            with Collection(spec, "userspace", engine=engine) as user:
                assert user.programs["css_iter"].test_run(bytes(64)).retval == 2
                assert hash_values(user, range(NKEYS)) == want, engine
    finally:
        (top / "b" / "x").rmdir()
        (top / "b").rmdir()


# A child that blocks SIGUSR1, says it is up, and prints the signal number it then takes.
_WAITER = ("import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])\n"
           "print('up', flush=True)\nprint(signal.sigwaitinfo([signal.SIGUSR1]).si_signo, "
           "flush=True)\n")


def _signal_program(child: int) -> str:
    """bpf_send_signal_task's returns: kthreadd (pid 2: -EPERM), the child with signal 65
    (-EINVAL), signal 0 (0), pid type 5 (-EINVAL), then SIGUSR1 to its process (0)."""
    a = ""
    for k, (pid, sig, ptype) in enumerate(((2, 10, 0), (child, 65, 0), (child, 0, 0),
                                           (child, 10, 5), (child, 10, 1))):
        a += f"r1 = {pid}\ncall KFUNC(bpf_task_from_pid)\nif r0 == 0 goto s{k}\nr6 = r0\n"
        a += f"r1 = r6\nr2 = {sig}\nr3 = {ptype}\nr4 = 7\ncall KFUNC(bpf_send_signal_task)\n"
        a += "r9 = r0\n" + hash_put(k, "r9") + f"r1 = r6\ncall KFUNC(bpf_task_release)\ns{k}:\n"
    return a + "r0 = 2\nexit"


def test_send_signal_task_matches_linux() -> None:
    """The same returns, and the child takes SIGUSR1, from Linux and both engines."""
    engines = ["kernel", "interp", "jit"] if jit_available() else ["kernel", "interp"]
    got = {}
    for engine in engines:
        child = subprocess.Popen([sys.executable, "-c", _WAITER], stdout=subprocess.PIPE,
                                 text=True)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "up"
            spec = VerifierCase("signal", _signal_program(child.pid), None).spec()
            with (Collection(spec, "kernel") if engine == "kernel" else
                  Collection(spec, "userspace", engine=engine)) as coll:
                assert coll.programs["signal"].test_run(bytes(64)).retval == 2
                got[engine] = hash_values(coll, range(NKEYS))
            assert child.stdout.readline().strip() == "10", engine
        finally:
            child.kill()
            child.wait()
    assert [got["kernel"][k] for k in range(5)] == \
        [-errno.EPERM & 0xFFFF_FFFF, -errno.EINVAL & 0xFFFF_FFFF, 0,
         -errno.EINVAL & 0xFFFF_FFFF, 0]
    assert all(g == got["kernel"] for g in got.values()), got
