"""``bpf_res_spin_lock``/``_unlock`` and ``bpf_res_spin_lock_irqsave``/
``_unlock_irqrestore`` of ``kernel/bpf/helpers.c`` over the resilient queued spin lock
of ``kernel/bpf/rqspinlock.c`` (a ``struct bpf_res_spin_lock`` in a map value).

The lock's state is its word in the map value, as Linux's is: 0 free, 1 taken (the
locked byte). ``res_spin_lock`` checks the locks the CPU already holds before it waits
(the AA check) and answers -EDEADLK for one of them. A pyxdp program run is one
uninterrupted call on one thread, and the verifier makes a run release every lock it
takes (on every path, before its exit), while map updates leave the word out
(``copy_map_value``): a lock word that is not 0 when a run takes it is one this run
already holds, so the lock is -EDEADLK, else it is taken. Contention between CPUs
(waiting for a lock another CPU holds, -ETIMEDOUT after ``RES_DEF_TIMEOUT``) is not
modelled: where runs do overlap (the datapath's parallel polls) a lock another run
holds is -EDEADLK at once; the native twin takes the word with a cmpxchg, so two runs
never both hold it. The IRQ flags of the _irqsave pair are never observable (the verifier
lets nothing but the _irqrestore read their stack slot). Every ``int`` return is
zero-extended in r0, as Linux 6.18's x86 JIT leaves it. Each has a native twin for the
JIT over the same word, so a call costs no Python.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import Text, c64
from pyxdp.vm.jit.natives import HelperNative, register_kfunc

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["RES_SPIN_LOCK_KFUNCS"]

M32 = 0xFFFF_FFFF
_LOCKED = 1  # _Q_LOCKED_VAL


def _lock(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """bpf_res_spin_lock(_irqsave): -EDEADLK for a lock this run holds, else taken."""
    if int.from_bytes(vm.mem.read(r1, 4), "little"):
        return -errno.EDEADLK & M32
    vm.mem.store(r1, 4, _LOCKED)
    return 0


def _unlock(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """bpf_res_spin_unlock(_irqrestore): the word is 0 again (void: r0 left 0)."""
    vm.mem.store(r1, 4, 0)
    return 0


def _word_fn(kind: str, nargs: int, lock: bool) -> Callable[[Natives], str]:
    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        p = f.ins("call ptr @translate(ptr %ctx, i64 %r1, i64 4, i1 true)")
        f.cbr(f.ins(f"icmp eq ptr {p}, null"), "slow", "go")
        f.at("slow")  # not a writable map value: the Python helper faults as it should
        f.do(f"ret i64 {c64(SLOW)}")
        f.at("go")
        if lock:  # atomic, as the fast path's cmpxchg: parallel polls share maps
            got = f.ins(f"cmpxchg ptr {p}, i32 0, i32 {_LOCKED} acquire monotonic")
            f.cbr(f.ins(f"extractvalue {{ i32, i1 }} {got}, 1"), "taken", "aa")
            f.at("aa")
            f.do(f"ret i64 {-errno.EDEADLK & M32}")
            f.at("taken")
            f.do("ret i64 0")
        else:
            f.do(f"store atomic i32 0, ptr {p} release, align 4")
            f.do("ret i64 0")
        args = ", ".join(["ptr %ctx"] + [f"i64 %r{k}" for k in range(1, nargs + 1)])
        return f.text(f"define internal i64 @{kind}({args}) nounwind")
    return define


# The kfuncs by name (bound as private helpers, like the iterator kfuncs).
RES_SPIN_LOCK_KFUNCS: dict[str, Callable[..., int]] = {}
for _name, _kind, _nargs, _lk in (
        ("bpf_res_spin_lock", "res_lock", 1, True),
        ("bpf_res_spin_unlock", "res_unlock", 1, False),
        ("bpf_res_spin_lock_irqsave", "res_lock_irqsave", 2, True),
        ("bpf_res_spin_unlock_irqrestore", "res_unlock_irqrestore", 2, False)):
    _fn = _lock if _lk else _unlock
    RES_SPIN_LOCK_KFUNCS[_name] = _fn
    register_kfunc(_name, _fn, HelperNative(_kind, _nargs, _word_fn(_kind, _nargs, _lk),
                                            ("translate",)))
