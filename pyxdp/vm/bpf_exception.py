"""BPF exceptions: the ``bpf_throw`` kfunc of ``kernel/bpf/helpers.c`` with the default
exception callback the verifier adds (``kernel/bpf/verifier.c``, Linux 6.18).

``bpf_throw(cookie)`` unwinds every frame of the run - the function that threw, the
functions that called it, up to the program's main function - and the program
returns what the exception callback returns: by default the cookie itself (the
callback Linux appends is ``r0 = r1; exit``), of which an XDP run keeps the low
32 bits as its action. The verifier sees that nothing is held when a program
throws and that no callback throws (:mod:`pyxdp.verifier.verifier`).

A program may have an exception callback of its own (``__exception_cb(cb)``:
:func:`pyxdp.spec.exception_callback` finds it): the throw then calls ``cb(cookie)``
on the main program's stack frame and the program returns what it returns.

On the interpreter the kfunc raises :class:`~pyxdp.vm.interpreter.ProgramThrow`,
which the run catches (and calls the callback); on the JIT its twin sets the run
status ``ST_THROW`` with the cookie, the throwing block and every function return at
once (as after a fault), and the program's main function turns the status back into
a return of the cookie, or of the callback's value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyxdp.vm.interpreter import ProgramThrow
from pyxdp.vm.jit.abi import ST_THROW, Natives
from pyxdp.vm.jit.ir import Text
from pyxdp.vm.jit.natives import HelperNative, register_kfunc

if TYPE_CHECKING:
    from pyxdp.vm.interpreter import Interpreter

__all__ = ["EXCEPTION_KFUNCS", "bpf_throw"]


def bpf_throw(vm: Interpreter, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """``bpf_throw(cookie)``: the run unwinds; it returns the cookie."""
    raise ProgramThrow(r1)


def _throw_fn(natives: Natives) -> str:
    """bpf_throw's twin: the status that unwinds every frame, the cookie beside it."""
    f = Text()
    f.at("entry")
    f.cset("%ctx", "fault_addr", "%r1")
    f.cset("%ctx", "status", str(ST_THROW))
    f.do("ret i64 0")
    return f.text("define internal i64 @bpf_throw(ptr %ctx, i64 %r1) nounwind")


EXCEPTION_KFUNCS: dict[str, Callable[..., int]] = {"bpf_throw": bpf_throw}
register_kfunc("bpf_throw", bpf_throw, HelperNative("bpf_throw", 1, _throw_fn))
