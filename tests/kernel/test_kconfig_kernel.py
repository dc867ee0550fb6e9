"""``__kconfig`` externs on Linux and pyxdp: ``samples/loader/kconfig.v{2,3,4}.o`` (int,
bool, tristate, char, char array, LINUX_KERNEL_VERSION, LINUX_HAS_BPF_COOKIE, weak
externs the configuration lacks) resolved from this machine's Kconfig and uname, and
again with Kconfig text of the caller's; the kernel loads the ``.kconfig`` map and its
BTF, and the program's copies of every value agree on the interpreter and JIT. (libbpf
1.1, through bpftool, built the same ``.kconfig`` bytes for this object here.)"""

from __future__ import annotations

import pytest

from pyxdp.collection import Collection
from pyxdp.elf.kconfig import kernel_version
from pyxdp.net.prog import jit_available

pytestmark = pytest.mark.kernel


@pytest.mark.parametrize("cpu", ["v2", "v3", "v4"])
@pytest.mark.parametrize("kconfig", [None, "CONFIG_HZ=1000\nCONFIG_XDP_SOCKETS=m\n"])
def test_kconfig_externs_match_linux(cpu: str, kconfig: str | None) -> None:
    obj = f"samples/loader/kconfig.{cpu}.o"
    outs = []
    engines = ["interp", "jit"] if jit_available() else ["interp"]
    for backend, engine in [("kernel", "auto")] + [("userspace", e) for e in engines]:
        with Collection.load(obj, backend, engine=engine, kconfig=kconfig) as c:
            assert c.programs["xdp_kconfig"].test_run(bytes(64)).retval == 2
            outs.append([c.maps["out"][i] for i in range(10)])
    assert all(o == outs[0] for o in outs), outs
    assert outs[0][1] == kernel_version() and outs[0][2] == 1
    if kconfig:
        assert outs[0][0] == 1000 and outs[0][5] == 2
