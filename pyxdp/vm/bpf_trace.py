"""``bpf_probe_read_kernel`` and ``bpf_probe_read_kernel_str`` of ``kernel/trace/bpf_trace.c``.

Linux 6.18 gives every program type these two when the loader has CAP_PERFMON
(``bpf_base_func_proto``), so XDP programs loaded by root call them - libbpf's
``BPF_CORE_READ`` reads through ``bpf_probe_read_kernel``, e.g. a field of a
kernel struct a kfunc returned. Both read with fault handling, as
:mod:`pyxdp.vm.maccess` models ``copy_from_kernel_nofault``: an address in one
of pyxdp's regions is read from it (the kernel memory pyxdp has: stack, packet,
map values, the kernel objects its kfuncs return); an address below 1 << 47,
non-canonical or in the vsyscall page is -ERANGE; any other -EFAULT (Linux
would read mapped kernel memory there).

* ``bpf_probe_read_kernel(dst, size, unsafe_ptr)``: ``copy_from_kernel_nofault``,
  the whole of ``dst`` zeroed on an error; 0 or -ERANGE/-EFAULT. A read that
  starts in a region and runs past its end is -EFAULT (Linux reads on into
  whatever kernel memory follows).
* ``bpf_probe_read_kernel_str(dst, size, unsafe_ptr)``:
  ``strncpy_from_kernel_nofault``: 0 for size 0; -ERANGE for a refused start;
  bytes up to and including the NUL, or ``size`` of them with the last made NUL,
  returning how many were copied; a fault zeroes all of ``dst`` and returns
  -EFAULT.

On the JIT each has a native twin over the same regions (``translate``).
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from pyxdp.errors import MemoryFault
from pyxdp.uapi.bpf import BpfFuncId
from pyxdp.vm.context import M64, helper, neg
from pyxdp.vm.jit.abi import SLOW, Natives
from pyxdp.vm.jit.ir import Text, ret_if
from pyxdp.vm.jit.natives import HelperNative, register_helper
from pyxdp.vm.maccess import nofault_allowed, nofault_allowed_ir, read_byte_nofault

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["probe_read_kernel", "probe_read_kernel_str"]

M32 = 0xFFFF_FFFF


@helper(int(BpfFuncId.BPF_FUNC_probe_read_kernel), "probe_read_kernel")
def probe_read_kernel(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    size = r2 & M32
    if not nofault_allowed(vm.mem, r3):
        err = errno.ERANGE
    else:
        try:
            data = vm.mem.read(r3 & M64, size)
        except MemoryFault:  # the read left the region
            err = errno.EFAULT
        else:
            vm.mem.write(r1, data)
            return 0
    vm.mem.write(r1, bytes(size))
    return neg(err)


@helper(int(BpfFuncId.BPF_FUNC_probe_read_kernel_str), "probe_read_kernel_str")
def probe_read_kernel_str(vm: Interpreter, r1: int, r2: int, r3: int, r4: int,
                          r5: int) -> int:
    size = r2 & M32
    if not size:
        return 0
    if not nofault_allowed(vm.mem, r3):
        vm.mem.write(r1, bytes(size))
        return neg(errno.ERANGE)
    out = bytearray()
    while True:
        b = read_byte_nofault(vm.mem, r3 + len(out))
        if b < 0:
            vm.mem.write(r1, bytes(size))
            return neg(errno.EFAULT)
        out.append(b)
        if not b or len(out) == size:
            break
    out[-1] = 0
    vm.mem.write(r1, bytes(out))
    return len(out)


# -- native twins -------------------------------------------------------------------------

def _dst(f: Text, size: str) -> str:
    """The host pointer of ``dst`` (``r1``, ``size`` bytes the verifier let the program
    pass); Python's helper takes the rare call whose bytes do not translate."""
    p = f.ins(f"call ptr @translate(ptr %ctx, i64 %r1, i64 {size}, i1 true)")
    ret_if(f, f.ins(f"icmp eq ptr {p}, null"), SLOW)
    f.cset("%ctx", "stack_dirty", "-1")  # dst is usually a stack frame's
    return p


def _zero_ret(f: Text, dst: str, size: str, err: int) -> None:
    f.memset(dst, size)
    f.do(f"ret i64 -{err}")


def _read_fn(natives: Natives) -> str:
    f = Text()
    f.at("entry")
    size = f.ins(f"and i64 %r2, {M32}")
    ok_size = f.ins(f"icmp ne i64 {size}, 0")
    work, empty = f.label("work"), f.label("empty")
    f.cbr(ok_size, work, empty)
    f.at(empty)  # nothing to copy or zero: only the address check
    allowed0 = nofault_allowed_ir(f, "%r3")
    f.do(f"ret i64 {f.ins(f'select i1 {allowed0}, i64 0, i64 -{errno.ERANGE}')}")
    f.at(work)
    dst = _dst(f, size)
    allowed = nofault_allowed_ir(f, "%r3")
    refused, go = f.label("refused"), f.label("go")
    f.cbr(allowed, go, refused)
    f.at(refused)
    _zero_ret(f, dst, size, errno.ERANGE)
    f.at(go)
    src = f.ins(f"call ptr @translate(ptr %ctx, i64 %r3, i64 {size}, i1 false)")
    fault, copy = f.label("fault"), f.label("copy")
    f.cbr(f.ins(f"icmp eq ptr {src}, null"), fault, copy)
    f.at(fault)
    _zero_ret(f, dst, size, errno.EFAULT)
    f.at(copy)
    f.memmove(dst, src, size)
    f.do("ret i64 0")
    return f.text("define internal i64 @probe_read_kernel(ptr %ctx, i64 %r1, i64 %r2, "
                  "i64 %r3) nounwind")


def strncpy_nofault_ir(f: Text, dst: str, src: str, size: str, entry: str
                       ) -> tuple[str, str, str, str]:
    """``strncpy_from_kernel_nofault``'s copy loop, entered from block ``entry``: bytes of
    the address ``src`` into ``dst`` up to and including a NUL, or ``size`` of them. Returns
    the blocks it leaves to - ``fault`` (a byte not readable; the count copied so far is
    ``i``) and ``done`` (``nxt`` bytes copied, the last a NUL or the ``size``-th) - with
    ``i`` and ``nxt``; the caller writes both blocks."""
    head, body, fault, done = f.label("head"), f.label("body"), f.label("fault"), f.label("done")
    f.br(head)
    f.at(head)
    i, nxt = f.tmp(), f.tmp()
    f.do(f"{i} = phi i64 [ 0, %{entry} ], [ {nxt}, %{body} ]")
    p = f.ins(f"call ptr @translate(ptr %ctx, i64 {f.ins(f'add i64 {src}, {i}')}, i64 1, "
              "i1 false)")
    readable = f.label("readable")
    f.cbr(f.ins(f"icmp eq ptr {p}, null"), fault, readable)
    f.at(readable)
    c = f.ins(f"load i8, ptr {p}, align 1")
    f.do(f"store i8 {c}, ptr {f.gep(dst, i)}, align 1")
    f.do(f"{nxt} = add i64 {i}, 1")
    end = f.ins(f"or i1 {f.ins(f'icmp eq i8 {c}, 0')}, {f.ins(f'icmp eq i64 {nxt}, {size}')}")
    f.cbr(end, done, body)
    f.at(body)
    f.br(head)
    return fault, done, i, nxt


def _read_str_fn(natives: Natives) -> str:
    f = Text()
    f.at("entry")
    size = f.ins(f"and i64 %r2, {M32}")
    ret_if(f, f.ins(f"icmp eq i64 {size}, 0"), 0)
    dst = _dst(f, size)
    refused, go = f.label("refused"), f.label("go")
    f.cbr(nofault_allowed_ir(f, "%r3"), go, refused)
    f.at(refused)
    _zero_ret(f, dst, size, errno.ERANGE)
    f.at(go)
    fault, done, _, nxt = strncpy_nofault_ir(f, dst, "%r3", size, go)
    f.at(fault)
    _zero_ret(f, dst, size, errno.EFAULT)
    f.at(done)
    f.do(f"store i8 0, ptr {f.gep(dst, f.ins(f'sub i64 {nxt}, 1'))}, align 1")
    f.do(f"ret i64 {nxt}")
    return f.text("define internal i64 @probe_read_kernel_str(ptr %ctx, i64 %r1, i64 %r2, "
                  "i64 %r3) nounwind")


register_helper(int(BpfFuncId.BPF_FUNC_probe_read_kernel),
                HelperNative("probe_read_kernel", 3, _read_fn, ("translate",)))
register_helper(int(BpfFuncId.BPF_FUNC_probe_read_kernel_str),
                HelperNative("probe_read_kernel_str", 3, _read_str_fn, ("translate",)))
