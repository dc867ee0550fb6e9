"""Per-CPU program-allocated objects: ``bpf_global_percpu_ma`` of ``kernel/bpf/memalloc.c``
and the ``bpf_percpu_obj_new_impl``/``bpf_percpu_obj_drop_impl`` kfuncs and the
``bpf_per_cpu_ptr``/``bpf_this_cpu_ptr`` helpers of ``kernel/bpf/helpers.c`` (Linux 6.18).

``bpf_percpu_obj_new(type)`` gives a program one zeroed copy of one of its own
structs (of scalars, at most 512 bytes: the verifier sees to it) per possible
CPU; the program reaches a copy only through ``bpf_this_cpu_ptr(p)`` (the running
CPU's) or ``bpf_per_cpu_ptr(p, cpu)`` (NULL for a CPU at or beyond
``nr_cpu_ids``), after the object went into a ``__percpu_kptr`` field of a map
value and was read back from it.

pyxdp keeps such an object in the arena of :mod:`pyxdp.vm.memalloc` as one
block: an 8-byte word (the copies' stride in its low 32 bits, their count -
the run's CPUs when it was made - in its high 32) and the copies one after the
other, the pointer the program holds being the block's. So freeing one
(``bpf_percpu_obj_drop``, a map update, delete or the map's end) is freeing an
arena object, and the helpers are arithmetic on the word, natively on the JIT.
A block the arena's size classes cannot hold (8 + stride x CPUs above 4088
bytes) is NULL, as a failed allocation is in Linux.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyxdp.btf.btf import Btf, BtfKind
from pyxdp.errors import HelperFault
from pyxdp.vm.context import RunContext, helper
from pyxdp.vm.jit.abi import NF_RUNCTX, SLOW, Natives
from pyxdp.vm.jit.ir import Text, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_helper, register_kfunc
from pyxdp.vm.memalloc import (
    DROP_NATIVE,
    map_arena,  # the run sees the arena
    obj_drop,
)

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["PERCPU_OBJ_KFUNCS", "make_percpu_obj_new"]

_WORD = 8  # the block's first word: stride | copies << 32


def make_percpu_obj_new(btf: Btf | None, nr_cpus: int) -> Callable[..., int]:
    """``bpf_percpu_obj_new_impl(local_type_id__k, meta__ign)`` for a program whose BTF
    is ``btf``, run on ``nr_cpus`` CPUs (``nr_cpu_ids``: one copy each)."""
    strides: dict[int, int] = {}

    def percpu_obj_new(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
        stride = strides.get(r1)
        if stride is None:
            t = btf.type_by_id(r1) if btf is not None and 0 < r1 < len(btf.types) else None
            if t is None or t.kind is not BtfKind.STRUCT:
                raise HelperFault(f"bpf_percpu_obj_new: {r1} is not the id of a struct of "
                                  "the program's BTF")
            stride = strides[r1] = max(8, (t.size_type + 7) & ~7)  # the unit_size
        a = map_arena(vm)
        p = a.alloc(_WORD + stride * nr_cpus)
        if p:
            a.u64[(p - a.region.base) >> 3] = stride | nr_cpus << 32
        return p

    return percpu_obj_new


def _copy(vm: Interpreter, p: int, cpu: int) -> int:
    """CPU ``cpu``'s copy of the object at ``p`` (0: no such CPU)."""
    w = vm.mem.load(p, 8)
    stride, n = w & 0xFFFF_FFFF, w >> 32
    return p + _WORD + cpu * stride if cpu < n else 0


@helper(153, "per_cpu_ptr")
def _per_cpu_ptr(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_per_cpu_ptr(percpu_ptr, cpu)``: CPU ``cpu``'s copy, NULL past the last CPU."""
    map_arena(vm)
    return _copy(vm, r1, r2 & 0xFFFF_FFFF)


@helper(154, "this_cpu_ptr")
def _this_cpu_ptr(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_this_cpu_ptr(percpu_ptr)``: the running CPU's copy."""
    map_arena(vm)
    cpu = vm.context.cpu if isinstance(vm.context, RunContext) else 0
    got = _copy(vm, r1, cpu)
    if not got:
        raise HelperFault(f"bpf_this_cpu_ptr: CPU {cpu} has no copy of the object at "
                          f"{r1:#x} (made for fewer CPUs)")
    return got


def _copy_fn(name: str, this_cpu: bool) -> Callable[[Natives], str]:
    """The helpers' twin: the word, then the copy's address (SLOW where Python decides:
    no run context for the running CPU, no arena at the address, this CPU beyond the
    copies)."""

    def define(natives: Natives) -> str:
        f = Text()
        f.at("entry")
        if this_cpu:
            ret_if(f, f.ins(f"xor i1 {f.flag(NF_RUNCTX)}, true"), SLOW)
            cpu = f.cget("%ctx", "cpu")
        else:
            cpu = f.ins("and i64 %r2, 4294967295")
        wp = f.ins("call ptr @translate(ptr %ctx, i64 %r1, i64 8, i1 false)")
        ret_if(f, f.ins(f"icmp eq ptr {wp}, null"), SLOW)
        w = f.ins(f"load i64, ptr {wp}, align 8")
        n = f.ins(f"lshr i64 {w}, 32")
        beyond = f.ins(f"icmp uge i64 {cpu}, {n}")
        ret_if(f, beyond, SLOW if this_cpu else 0)
        stride = f.ins(f"and i64 {w}, 4294967295")
        rel = f.ins(f"add i64 {f.ins(f'mul i64 {cpu}, {stride}')}, {_WORD}")
        f.do(f"ret i64 {f.ins(f'add i64 %r1, {rel}')}")
        args = "ptr %ctx, i64 %r1" + ("" if this_cpu else ", i64 %r2")
        return f.text(f"define internal i64 @{name}({args}) nounwind")

    return define


# bpf_percpu_obj_new_impl is bound per program (make_percpu_obj_new: its BTF, the CPUs);
# bpf_percpu_obj_drop frees the block as bpf_obj_drop frees an object (its twin too).
PERCPU_OBJ_KFUNCS: dict[str, Callable[..., int]] = {"bpf_percpu_obj_drop_impl": obj_drop}
register_kfunc("bpf_percpu_obj_drop_impl", obj_drop, DROP_NATIVE)
register_helper(153, HelperNative("per_cpu_ptr", 2, _copy_fn("per_cpu_ptr", False),
                                  ("translate",)))
register_helper(154, HelperNative("this_cpu_ptr", 1, _copy_fn("this_cpu_ptr", True),
                                  ("translate",)))
