"""Tasks and cgroups in a map value's referenced __kptr fields (bpf_kptr_xchg with
pyxdp.vm.task_kfuncs' objects): tests/verifier_objects/task_kptr.o on both engines. The
field holds one reference to its task, which the exchange hands back to the program, a
user-space update of the element drops (bpf_obj_free_fields calling the struct's
destructor) and so does the map going; user space reads the field as zero.
tests/kernel/test_task_kptr_kernel.py holds the program to Linux."""

from __future__ import annotations

import gc
import os
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from pyxdp.collection import Collection, Program
from pyxdp.elf import load_collection_spec
from pyxdp.net.prog import jit_available
from pyxdp.uapi.bpf import XdpAction
from pyxdp.vm.memalloc import drop_kptr
from pyxdp.vm.task_kfuncs import kernel_objects

OBJ = Path(__file__).resolve().parent / "verifier_objects" / "task_kptr.o"


def _run(prog: Program, pid: int, slot: int, op: int) -> XdpAction:
    return prog.test_run(struct.pack("<QII", pid, slot, op) + bytes(48)).retval


def _refs(pid: int) -> int:
    ko = kernel_objects()
    with ko.locked():
        o = ko.task(pid)
        assert o is not None
        return o.refs


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_a_held_task_keeps_one_reference(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    gc.collect()  # maps of earlier tests drop what they hold now
    me, kthreadd = os.getpid(), 2
    spec = load_collection_spec(OBJ)
    spec = replace(spec, programs={"xdp_task_kptr": spec.programs["xdp_task_kptr"]})
    base = {pid: _refs(pid) for pid in (me, kthreadd)}
    with Collection(spec, "userspace", engine=engine) as c:
        prog = c.programs["xdp_task_kptr"]

        assert _run(prog, me, 0, 0) == XdpAction.XDP_PASS  # stored, no old one
        assert _run(prog, me, 1, 0) == XdpAction.XDP_PASS
        assert _refs(me) - base[me] == 2
        assert _run(prog, kthreadd, 0, 0) == XdpAction.XDP_TX  # the old one released
        assert _refs(me) - base[me] == 1 and _refs(kthreadd) - base[kthreadd] == 1
        assert c.maps["held"][0] == {"task": 0, "cgrp": 0, "seen": me, "extra": 0}
        # a run that only reads the field (no kfunc gave the run the object first)
        assert _run(prog, 0, 1, 2) == XdpAction.XDP_TX
        assert c.maps["held"][1] == {"task": 0, "cgrp": 0, "seen": me, "extra": me}
        assert _refs(me) - base[me] == 1  # bpf_task_acquire's reference released
        c.maps["held"][1] = {"task": 0, "cgrp": 0, "seen": 0, "extra": 0}
        assert _refs(me) == base[me]  # the update dropped the field's reference
        assert _run(prog, 0, 1, 1) == XdpAction.XDP_PASS  # and the field is empty
        del prog
    del c
    gc.collect()  # the map went: the task slot 0 held is released
    assert _refs(kthreadd) == base[kthreadd]


def test_a_field_let_go_inside_a_kfunc_call_drops_at_its_end() -> None:
    """A map freed by the garbage collector while a kfunc of the same thread holds the
    objects' lock: the field's reference goes when the call ends, never a deadlock."""
    ko = kernel_objects()
    with ko.locked():
        o = ko.task(os.getpid())
        assert o is not None
        o.refs += 1  # the field's reference
        before = o.refs
        drop_kptr(ko.addr(o))  # what the map's finalizer calls
        assert o.refs == before
    assert o.refs == before - 1
