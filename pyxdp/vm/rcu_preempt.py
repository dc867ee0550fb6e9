"""``bpf_rcu_read_lock``/``_unlock``, ``bpf_preempt_disable``/``_enable`` and
``bpf_local_irq_save``/``_restore`` of ``kernel/bpf/helpers.c`` (``rcu_read_lock()``,
``preempt_disable()``, ``local_irq_save()`` and their pairs).

A pyxdp program run is one uninterrupted call on one thread: nothing frees memory under
it, nothing preempts it and no interrupt runs in it, so at run time the six kfuncs have
nothing to do (they are void: r0 is left 0). The IRQ flags ``bpf_local_irq_save`` stores
in its stack slot are never observable: the verifier lets nothing but
``bpf_local_irq_restore`` read that slot. What Linux checks of them is the verifier's
(:mod:`pyxdp.verifier.verifier`: no nested RCU section, every section closed,
preemption enabled again and IRQ state restored, last saved first, before the exit or a
tail call, no global function call with preemption disabled). Each has a native twin for
the JIT, so a call costs no Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyxdp.vm.jit.abi import Natives
from pyxdp.vm.jit.ir import Text
from pyxdp.vm.jit.natives import HelperNative, register_kfunc

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["RCU_PREEMPT_KFUNCS"]


def _nothing(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """The run-time effect of all six: none."""
    return 0


def _nothing_fn(natives: Natives) -> str:
    f = Text()
    f.at("entry")
    f.do("ret i64 0")
    return f.text("define internal i64 @rcu_preempt_nop(ptr %ctx) nounwind")


# The kfuncs by name (bound as private helpers, like the iterator kfuncs).
RCU_PREEMPT_KFUNCS: dict[str, Callable[..., int]] = {
    name: _nothing for name in ("bpf_rcu_read_lock", "bpf_rcu_read_unlock",
                                "bpf_preempt_disable", "bpf_preempt_enable",
                                "bpf_local_irq_save", "bpf_local_irq_restore")}
for _name in RCU_PREEMPT_KFUNCS:
    register_kfunc(_name, _nothing, HelperNative("rcu_preempt_nop", 0, _nothing_fn))
