"""SEC("syscall") programs on the userspace backend where Linux needs no comparison
(tests/kernel/test_syscall_prog_kernel.py holds the runs to Linux's): they are no XDP
programs to attach or tail-call, and a run that faults says so in one line."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import KernelError, MapError
from pyxdp.net.netdevice import Host
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm.interpreter import DEFAULT_BUDGET

OBJ = Path(__file__).resolve().parent / "verifier_objects" / "syscall_prog.o"


def test_syscall_program_is_not_attached_as_xdp() -> None:
    with Host("sys", engine="interp") as h:
        dev = h.add_device("eth0")
        coll = h.load(OBJ)
        with pytest.raises(KernelError, match="sys_null is a syscall program, not an XDP "
                           "one") as e:
            dev.attach_xdp(coll.programs["sys_null"])
        assert e.value.errno == errno.EINVAL
        dev.attach_xdp(coll.programs["xdp_get"])


def test_syscall_program_is_no_tail_call_target() -> None:
    from pyxdp.spec import MapSpec
    with Collection.load(OBJ, engine="interp") as coll:
        arr = coll.backend.create_map(
            MapSpec("progs", BpfMapType.BPF_MAP_TYPE_PROG_ARRAY, 4, 4, 2), {})
        with pytest.raises(MapError, match="cannot be a tail call target") as e:
            coll.backend.set_prog_array(arr, 0, coll["sys_null"].handle)
        assert e.value.errno == errno.EINVAL
        coll.backend.set_prog_array(arr, 0, coll["xdp_get"].handle)


def test_a_fault_ends_the_run_in_one_line() -> None:
    # 1,000,000 bpf_loop iterations outrun the interpreter's instruction budget
    assert DEFAULT_BUDGET < 5_000_000
    with Collection.load(OBJ, engine="interp") as coll:
        args = struct.pack("<IIQQQiI16s", 1, 1_000_000, 5, 0, 0, 0, 0, b"")
        r = coll["sys_store"].test_run(b"", ctx_in=args)
        assert r.retval == 0 and r.fault is not None
        assert r.fault.startswith("sys_store: ") and "\n" not in r.fault
        assert "budget" in r.fault


def test_max_ctx_offset_counts_kfunc_arguments() -> None:
    """check_helper_mem_access raises max_ctx_offset for an argument pointing into a
    syscall program's context: crypto.o's sys_crypto_acquire touches its context only
    through bpf_crypto_ctx_create's params (408 bytes), crypto_setup also stores err at
    408 (4 bytes). The figure survives the verifier cache's encoding."""
    from pyxdp.elf import load_collection_spec
    from pyxdp.verifier import verify
    from pyxdp.verifier.facts import decode_facts, encode_facts
    spec = load_collection_spec(OBJ.parent / "crypto.o")
    ends = {}
    for name in ("sys_crypto_acquire", "crypto_setup"):
        mem = verify(spec.programs[name], spec.maps, btf=spec.btf).mem
        assert decode_facts(encode_facts(mem)) == mem
        ends[name] = max(a.ctx_end for a in mem.values())
    assert ends == {"sys_crypto_acquire": 408, "crypto_setup": 408}
