"""``bpf_get_current_pid_tgid`` (#14) in XDP against Linux 6.18: under
BPF_PROG_TEST_RUN it is the calling task's ``tgid << 32 | pid``, on the main thread and
on another one, and pyxdp's interpreter and JIT give the same."""

from __future__ import annotations

import threading

import pytest

from pyxdp.collection import Collection
from pyxdp.net.prog import jit_available
from pyxdp.testing.programs import asm_collection

pytestmark = pytest.mark.kernel

# *(u64 *)data = bpf_get_current_pid_tgid(); return XDP_PASS
PID_TGID = asm_collection("""
r6 = *(u32 *)(r1 +0)
r7 = *(u32 *)(r1 +4)
call 14
r2 = r6
r2 += 8
if r2 > r7 goto out
*(u64 *)(r6 +0) = r0
out:
r0 = 2
exit
""")


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_pid_tgid_is_the_calling_task_as_in_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    with Collection(PID_TGID, "kernel") as k, \
            Collection(PID_TGID, "userspace", engine=engine) as u:
        got: list[tuple[bytes, bytes, int]] = []

        def run() -> None:
            kr = k.programs["t"].test_run(bytes(64))
            ur = u.programs["t"].test_run(bytes(64))
            got.append((kr.data_out[:8], ur.data_out[:8], threading.get_native_id()))

        run()
        t = threading.Thread(target=run)
        t.start()
        t.join()
    assert len(got) == 2 and got[0][2] != got[1][2]
    for kern, user, tid in got:
        assert user == kern
        assert int.from_bytes(kern, "little") & 0xFFFF_FFFF == tid
