"""``bpf_modify_return_test_tp`` of ``net/bpf/test_run.c``: the one kfunc of the
kernel's BPF_PROG_TEST_RUN harness that Linux 6.18 lets an XDP program call.

``int bpf_modify_return_test_tp(int nonce)`` fires the ``bpf_trigger_tp``
tracepoint with ``nonce`` and returns it. Only tracing programs attached to that
tracepoint see the firing; pyxdp runs none, so the call's whole effect is its
return value: the argument's low 32 bits, zero-extended in r0 as Linux 6.18's x86
JIT leaves an ``int`` (measured: -5 comes back as 0xfffffffb). The twin does the
same on the JIT.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyxdp.vm.jit.abi import Natives
from pyxdp.vm.jit.ir import Text
from pyxdp.vm.jit.natives import HelperNative, register_kfunc

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["TEST_RUN_KFUNCS", "modify_return_test_tp"]

M32 = 0xFFFF_FFFF


def modify_return_test_tp(vm: Interpreter, r1: int, r2: int, r3: int, r4: int,
                          r5: int) -> int:
    """``bpf_modify_return_test_tp(nonce)``: ``nonce``."""
    return r1 & M32


def _tp_fn(natives: Natives) -> str:
    f = Text()
    f.at("entry")
    f.do(f"ret i64 {f.ins(f'and i64 %r1, {M32}')}")
    return f.text("define internal i64 @modify_return_test_tp(ptr %ctx, i64 %r1) nounwind")


register_kfunc("bpf_modify_return_test_tp", modify_return_test_tp,
               HelperNative("modify_return_test_tp", 1, _tp_fn))

# The kfuncs by name (bound as private helpers, like the iterator kfuncs).
TEST_RUN_KFUNCS = {"bpf_modify_return_test_tp": modify_return_test_tp}
