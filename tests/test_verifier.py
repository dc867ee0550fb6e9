"""pyxdp's verifier (pyxdp.verifier) against Linux 6.18's verdicts, without a kernel.

Every program of the corpus (pyxdp.testing.verifier_cases) gets the verdict
Linux gave it - accepted, or refused with the same last log line - and every
committed object gets Linux's verdict (tests/kernel/test_verifier_kernel.py
re-measures both on the running kernel). Loading into the userspace backend
verifies by default: a refused program raises VerifierError with Linux's
message, the pc, the C line and the registers; ``verify=False`` and
``--no-verify`` keep the run-time checks only.
"""

from __future__ import annotations

import errno
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pyxdp.btf.core import CoreRelocationError
from pyxdp.cli.main import main
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import (
    NotSupportedError,
    ObjectError,
    PyxdpError,
    UnsupportedHelper,
    VerifierError,
)
from pyxdp.net.netdevice import Host
from pyxdp.net.prog import jit_available
from pyxdp.spec import ProgramSpec
from pyxdp.testing.verifier_cases import CASES, LOOPS2_WALKS, VerifierCase
from pyxdp.uapi.bpf import XdpAction
from pyxdp.verifier import verify
from pyxdp.verifier.kfuncs import KFUNCS, KArg, KfuncProto, KParam, register_kfunc
from pyxdp.verifier.tnum import t_add, t_and, t_in, t_mul, t_range, t_sub

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
OBJECTS = sorted(SAMPLES.glob("*.o")) + sorted((SAMPLES / "loader").glob("*.o"))
# Linux refuses these; pyxdp's verdict on each (xsk_redirect.o calls pyxdp's own helper).
REFUSED = {"unchecked.o": "R1 offset is outside of the packet",
           "rx_meta.o": "metadata kfuncs require device-bound program"}
# Objects of programs Linux refuses one by one (autoload off), each for its own reason
# (tests/kernel/test_res_spin_lock_kernel.py measures Linux's).
REFUSED_PROGS = {
    "res_lock_bad.o": {
        "unchecked": "bpf_res_spin_unlock without taking a lock",
        "aa": "Acquiring the same lock again, AA deadlock detected",
        "exit_held": "BPF_EXIT instruction in main prog cannot be used inside "
                     "bpf_spin_lock-ed region",
        "helper_held": "function calls are not allowed while holding a lock",
        "out_of_order": "bpf_res_spin_unlock cannot be out of order",
        "wrong_kind": "bpf_res_spin_unlock of different lock",
        "irq_class": "irq flag acquired by native kfuncs cannot be restored with lock kfuncs",
        "wrong_map": "map 'plain' has no valid bpf_res_spin_lock",
        "on_stack": "arg#0 doesn't point to map value or allocated object",
        "helper_overlap": "bpf_res_spin_lock cannot be accessed directly by load/store",
        "nested_store": "bpf_res_spin_lock cannot be accessed directly by load/store",
        "kfunc_overlap": "arg#1 arg#2 memory, len pair leads to invalid memory access",
        "var_off": "R1 doesn't have constant offset. bpf_res_spin_lock has to be at the "
                   "constant offset",
        "nested_wrong_off": "off 8 doesn't point to 'struct bpf_res_spin_lock' that is at 12",
        "global_aa": "Acquiring the same lock again, AA deadlock detected",
        "plain_under_res": "function calls are not allowed while holding a lock",
        "plain_unlock_first": "bpf_spin_unlock cannot be out of order",
        "res_unlock_plain": "bpf_spin_unlock of different lock",
    },
}


def modelled(prog: ProgramSpec) -> bool:
    """XDP programs (what pyxdp's verifier covers)."""
    return prog.prog_type == "xdp"


def _verdict(case: VerifierCase) -> tuple[str | None, int]:
    """pyxdp's verdict on ``case``: the reason and errno of a refusal, ``(None, 0)``."""
    spec = case.spec()
    (prog,) = spec.programs.values()
    try:
        verify(prog, spec.maps, btf=spec.btf)
    except VerifierError as e:
        return e.reason, e.errno
    return None, 0


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_verdict_is_linux(case: VerifierCase) -> None:
    assert _verdict(case) == (case.linux, case.errno)


PINNED = [c for c in CASES if c.processed]


@pytest.mark.parametrize("case", PINNED, ids=[c.name for c in PINNED])
def test_corpus_walk_is_linux(case: VerifierCase) -> None:
    # Linux's processed count of the cases whose walk differed once (pruning rules).
    spec = case.spec()
    (prog,) = spec.programs.values()
    assert verify(prog, spec.maps, btf=spec.btf).insns_processed == case.processed


RAW_ACCEPTED = [c for c in CASES if c.linux is None and c.raw]


@pytest.mark.parametrize("engine", ["interp", "jit"])
@pytest.mark.parametrize("case", RAW_ACCEPTED, ids=[c.name for c in RAW_ACCEPTED])
def test_accepted_odd_encodings_load_and_run(case: VerifierCase, engine: str) -> None:
    """Linux loads reserved fields in dead code and an exit's offset (its walk never
    checks them); so does pyxdp, on both engines, which run the program without them."""
    if engine == "jit" and not jit_available():
        pytest.skip("llvmlite is not importable here")
    col = Collection(case.spec(), "userspace", engine=engine)
    (prog,) = col.programs.values()
    assert prog.test_run(bytes(64)).retval == XdpAction.XDP_PASS
    with pytest.raises(PyxdpError, match="reserved field"):  # unverified: not loaded
        Collection(case.spec(), "userspace", engine=engine, verify=False)


def test_corpus_is_broad() -> None:
    refused = {c.linux for c in CASES if c.linux}
    assert len(CASES) >= 100 and len(refused) >= 60
    assert sum(c.linux is None for c in CASES) >= 30


@pytest.mark.parametrize("obj", OBJECTS, ids=[str(p.relative_to(SAMPLES)) for p in OBJECTS])
def test_objects_get_linux_verdict(obj: Path) -> None:
    spec = load_collection_spec(obj)
    for prog in spec.programs.values():
        if not modelled(prog):
            continue
        reason = REFUSED_PROGS[obj.name][prog.name] if obj.name in REFUSED_PROGS else \
            REFUSED.get(obj.name)
        if reason is not None:
            with pytest.raises(VerifierError) as e:
                verify(prog, spec.maps, btf=spec.btf)
            assert e.value.reason == reason
        else:
            res = verify(prog, spec.maps, btf=spec.btf)
            assert 0 < res.insns_processed < 10_000


# Instructions Linux 6.18 walks verifying each accepted sample program (``processed N
# insns`` in its log at log level 4, measured on this machine): pyxdp prunes where and as
# Linux does (prune points, when a state is kept, compared and dropped, precision), so it
# walks the same number.
LINUX_PROCESSED = {
    "adjust_tail.o:xdp_icmp_too_big": 251, "chain.o:chain_b": 52, "chain.o:chain_first": 18,
    "chain.o:chain_frags": 19, "chain.o:chain_last": 19, "chain.o:chain_mod": 40,
    "core.o:xdp_core": 70, "ct.o:xdp_ct": 1415, "ct.o:xdp_ct_track": 650,
    "dynptr.o:xdp_dynptr": 486, "frags.o:xdp_frags": 190, "fwd.o:xdp_fwd": 234,
    "lb.o:lb_ingress": 439, "lb.o:lb_non_vip": 415, "meta.o:xdp_meta_consumer": 27,
    "meta.o:xdp_meta_producer": 220, "mixed.o:xdp_count": 32, "mixed.o:xdp_legacy": 2,
    "redirect_bcast.o:xdp_redirect_bcast": 15, "redirect_bcast.o:xdp_redirect_bcast_excl": 15,
    "redirect_cpu.o:xdp_cpumap_filter": 206, "redirect_cpu.o:xdp_redirect_cpu_hash": 705,
    "redirect_cpu.o:xdp_redirect_cpu_proto": 223, "redirect_cpu.o:xdp_redirect_cpu_rr": 112,
    "redirect_map.o:xdp_redirect_map_egress": 25, "redirect_map.o:xdp_redirect_map_prog": 64,
    "res_lock.o:xdp_res_lock": 211, "res_lock.o:xdp_res_lock_iter": 73,
    "res_lock.o:xdp_res_lock_neg": 25, "res_lock.o:xdp_res_lock_global": 17,
    "sampler.o:xdp_sampler": 246, "timer.o:xdp_timer": 459, "xdp1.o:xdp_prog1": 157,
    "xdp2.o:xdp_prog2": 433, "xsk.o:xdp_sock_prog": 20,
}


def test_walks_as_many_instructions_as_linux() -> None:
    got = {}
    for key in LINUX_PROCESSED:
        obj, name = key.split(":")
        spec = load_collection_spec(SAMPLES / obj)
        got[key] = verify(spec.programs[name], spec.maps, btf=spec.btf).insns_processed
    assert got == LINUX_PROCESSED


# Linux 6.18's verdicts on tests/verifier_objects/loops.o (clang-16 output of bpf_for,
# can_loop and bpf_loop; tests/kernel/test_verifier_kernel.py re-measures them).
LOOPS = {"xdp_iter_sum": None, "xdp_iter_off_by_one": "R2 offset is outside of the packet",
         "xdp_can_loop_sum": None,
         "xdp_loop_walk": "R5 min value is outside of the allowed memory range",
         "xdp_loop_count": None, "xdp_loop_then_branches": None}
# Linux 6.18's processed count where the walk once differed: after a bpf_loop call the
# states outside the callback's loop prune on imprecise scalars (NOT_EXACT).
LOOPS_PROCESSED = {"xdp_loop_then_branches": 223}


def test_clang_loops_get_linux_verdict() -> None:
    spec = load_collection_spec(Path(__file__).parent / "verifier_objects" / "loops.o")
    got = {}
    for name, prog in spec.programs.items():
        try:
            res = verify(prog, spec.maps, btf=spec.btf)
            got[name] = None
            assert res.insns_processed < 1000, name  # the loops converge
            assert res.insns_processed == LOOPS_PROCESSED.get(name, res.insns_processed), name
        except VerifierError as e:
            got[name] = e.reason
    assert got == LOOPS


def test_clang19_loops_walk_as_linux() -> None:
    spec = load_collection_spec(Path(__file__).parent / "verifier_objects" / "loops2.o")
    got: dict[str, object] = {}
    for name, prog in spec.programs.items():
        try:
            got[name] = verify(prog, spec.maps, btf=spec.btf).insns_processed
        except VerifierError as e:
            got[name] = (e.reason, e.errno)
    assert got == LOOPS2_WALKS


# Linux 6.18's verdicts (reason, errno) on tests/verifier_objects/local_kptr.o: objects of
# bpf_obj_new, bpf_obj_drop and bpf_kptr_xchg used right and wrong (the kernel test
# re-measures them).
LOCAL_KPTR = {
    "xdp_new_drop": (None, 0), "xdp_xchg": (None, 0),
    "xdp_leak": ("BPF_EXIT instruction in main prog would lead to reference leak",
                 errno.EINVAL),
    "xdp_drop_twice": ("R1 must be referenced or trusted", errno.EINVAL),
    "xdp_use_after_drop": ("R6 invalid mem access 'scalar'", errno.EACCES),
    "xdp_drop_null": ("Possibly NULL pointer passed to trusted arg0", errno.EACCES),
    "xdp_out_of_bounds": ("access beyond struct obj at off 16 size 4", errno.EACCES),
    "xdp_use_after_xchg": ("R6 invalid mem access 'scalar'", errno.EACCES),
    "xdp_xchg_wrong_type": ("invalid kptr access, R2 type=ptr_other expected=ptr_obj",
                            errno.EACCES),
    "xdp_xchg_not_kptr": ("off=0 doesn't point to kptr", errno.EACCES),
    "xdp_store_kptr": ("store to referenced kptr disallowed", errno.EACCES),
    "xdp_kptr_half": ("kptr access size must be BPF_DW", errno.EACCES),
    "xdp_rcu_not_owned": ("R1 must be referenced or trusted", errno.EINVAL),
    "xdp_xchg_nested": (None, 0),
    "xdp_kptr_helper": ("kptr cannot be accessed indirectly by helper", errno.EACCES),
}


def _verdicts(obj: Path, types: tuple[str, ...] = ("xdp",)
              ) -> tuple[dict[str, tuple[str | None, int]], dict[str, int]]:
    """Every program of ``obj`` of ``types`` verified: (reason, errno) - (None, 0) when
    accepted - and the instructions processed, by program name."""
    spec = load_collection_spec(obj)
    got: dict[str, tuple[str | None, int]] = {}
    processed: dict[str, int] = {}
    for name, prog in spec.programs.items():
        if prog.prog_type not in types:
            continue
        try:
            processed[name] = verify(prog, spec.maps, btf=spec.btf).insns_processed
            got[name] = (None, 0)
        except VerifierError as e:
            got[name] = (e.reason, e.errno)
            processed[name] = int(e.log.rsplit("processed ", 1)[1].split()[0])
    return got, processed


def test_local_kptr_mistakes_get_linux_verdict() -> None:
    assert _verdicts(Path(__file__).parent / "verifier_objects" / "local_kptr.o")[0] == \
        LOCAL_KPTR


# Linux 6.18's verdicts (reason, errno) on tests/verifier_objects/crypto.o's programs:
# a struct bpf_crypto_ctx kept in a map value's __kptr field (a kernel object: its plain
# load an RCU pointer) passed to bpf_crypto_encrypt/_decrypt with dynptrs, right and
# wrong; and the instructions Linux processed where pyxdp's walk is the same (the kernel
# test re-measures the verdicts).
CRYPTO = {
    "xdp_crypt": (None, 0), "xdp_crypto_roundtrip": (None, 0),
    "xdp_crypto_maybe_null": ("Possibly NULL pointer passed to trusted arg0", errno.EACCES),
    "xdp_crypto_uninit_src": ("Expected an initialized dynptr as arg #1", errno.EINVAL),
    "xdp_crypto_siv_bytes": ("Expected an initialized dynptr as arg #3", errno.EINVAL),
    "xdp_crypto_not_ctx": ("arg#0 pointer type STRUCT bpf_crypto_ctx must point to scalar, "
                           "or struct with scalar", errno.EINVAL),
    "xdp_crypto_xchg_leak": ("BPF_EXIT instruction in main prog would lead to reference "
                             "leak", errno.EINVAL),
    "xdp_crypto_xchg_back": ("calling kernel function bpf_crypto_ctx_release is not "
                             "allowed", errno.EACCES),
    "xdp_crypto_store": ("store to referenced kptr disallowed", errno.EACCES),
    # its SEC("syscall") programs: a context made (bpf_crypto_ctx_create, the params in
    # the program's context), acquired, kept with bpf_kptr_xchg and released
    "crypto_setup": (None, 0), "sys_crypto_acquire": (None, 0),
    "sys_crypto_leak": ("BPF_EXIT instruction in main prog would lead to reference leak",
                        errno.EINVAL),
    "sys_crypto_maybe_null": ("Possibly NULL pointer passed to trusted arg0", errno.EACCES),
    "sys_crypto_twice": ("arg#0 pointer type STRUCT bpf_crypto_ctx must point to scalar, "
                         "or struct with scalar", errno.EINVAL),
    "sys_crypto_size": ("arg#0 arg#1 memory, len pair leads to invalid memory access",
                        errno.EACCES),
    "sys_crypto_null_err": ("Possibly NULL pointer passed to trusted arg2", errno.EACCES),
    "sys_crypto_offset": ("dereference of modified ctx ptr R1 off=4 disallowed", errno.EACCES),
}
CRYPTO_PROCESSED = {"xdp_crypto_roundtrip": 57, "sys_crypto_acquire": 23}


def test_crypto_kfunc_mistakes_get_linux_verdict() -> None:
    got, processed = _verdicts(Path(__file__).parent / "verifier_objects" / "crypto.o",
                               types=("xdp", "syscall"))
    assert got == CRYPTO
    assert {n: processed[n] for n in CRYPTO_PROCESSED} == CRYPTO_PROCESSED


# Linux 6.18's verdicts (reason, errno) on tests/verifier_objects/task_kptr.o: tasks and
# cgroups kept in a map value's referenced __kptr fields with bpf_kptr_xchg, right and
# wrong (the field's plain load is an RCU pointer: KF_RCU kfuncs take it, KF_RELEASE and
# KF_TRUSTED_ARGS ones do not), and a struct bpf_cpumask's field (whose release kfunc XDP
# may not call); and the instructions Linux processed on each (the kernel test re-measures
# the verdicts).
TASK_KPTR = {
    "xdp_task_kptr": (None, 0),
    "xdp_task_kptr_leak": ("BPF_EXIT instruction in main prog would lead to reference leak",
                           errno.EINVAL),
    "xdp_task_kptr_rcu_in": ("R2 must be referenced when passed to release function",
                             errno.EINVAL),
    "xdp_task_kptr_wrong_type": ("invalid kptr access, R2 type=ptr_cgroup "
                                 "expected=ptr_task_struct", errno.EACCES),
    "xdp_task_kptr_use_after": ("R7 invalid mem access 'scalar'", errno.EACCES),
    "xdp_task_kptr_maybe_null": ("Possibly NULL pointer passed to trusted arg0", errno.EACCES),
    "xdp_task_kptr_release_rcu": ("R1 must be referenced or trusted", errno.EINVAL),
    "xdp_task_kptr_under_cgroup": (None, 0),
    "xdp_task_kptr_signal_rcu": ("R1 must be referenced or trusted", errno.EINVAL),
    "xdp_task_kptr_move": (None, 0),
    "xdp_cpumask_kptr_release": ("calling kernel function bpf_cpumask_release is not allowed",
                                 errno.EACCES),
    "xdp_cpumask_kptr_load": (None, 0),
}
TASK_KPTR_PROCESSED = {
    "xdp_task_kptr": 145, "xdp_task_kptr_leak": 16, "xdp_task_kptr_rcu_in": 11,
    "xdp_task_kptr_wrong_type": 14, "xdp_task_kptr_use_after": 20,
    "xdp_task_kptr_maybe_null": 12, "xdp_task_kptr_release_rcu": 10,
    "xdp_task_kptr_under_cgroup": 22, "xdp_task_kptr_signal_rcu": 15, "xdp_task_kptr_move": 34,
    "xdp_cpumask_kptr_release": 13, "xdp_cpumask_kptr_load": 14,
}


def test_kernel_struct_kptr_mistakes_get_linux_verdict() -> None:
    got, processed = _verdicts(Path(__file__).parent / "verifier_objects" / "task_kptr.o")
    assert got == TASK_KPTR
    assert processed == TASK_KPTR_PROCESSED


# Linux 6.18's verdicts (reason, errno) on tests/verifier_objects/graph_list.o: BPF linked
# lists and refcounted objects used right and wrong, and the instructions Linux processed
# (the kernel test re-measures the verdicts).
GRAPH_LIST = {
    "xdp_list_ok": (None, 0),
    "xdp_push_unlocked": ("bpf_spin_lock at off=8 must be held for bpf_list_head",
                          errno.EINVAL),
    "xdp_pop_unlocked": ("bpf_spin_lock at off=8 must be held for bpf_list_head",
                         errno.EINVAL),
    "xdp_wrong_node": ("operation on bpf_list_head expects arg#1 bpf_list_node at offset=8 "
                       "in struct elem, but arg is at offset=16 in struct other", errno.EINVAL),
    "xdp_use_after_unlock": ("R6 invalid mem access 'scalar'", errno.EACCES),
    "xdp_pop_leak": ("BPF_EXIT instruction in main prog would lead to reference leak",
                     errno.EINVAL),
    "xdp_push_twice": ("arg#1 expected pointer to allocated object", errno.EINVAL),
    "xdp_push_null": ("R7 pointer arithmetic on ptr_or_null_ prohibited, null-check it first",
                      errno.EACCES),
    "xdp_head_access": ("bpf_list_head cannot be accessed directly by load/store",
                        errno.EACCES),
    "xdp_node_access": ("direct access to bpf_list_node is disallowed", errno.EACCES),
    "xdp_drop_in_lock": ("function calls are not allowed while holding a lock", errno.EINVAL),
    "xdp_peek_after_unlock": ("R7 invalid mem access 'scalar'", errno.EACCES),
    "xdp_drop_peeked": ("R1 must be referenced or trusted", errno.EINVAL),
    "xdp_other_value_lock": ("bpf_spin_lock at off=8 must be held for bpf_list_head",
                             errno.EINVAL),
    "xdp_acquire_plain": ("arg#0 doesn't point to a type with bpf_refcount field",
                          errno.EINVAL),
    "xdp_acquire_owned": (None, 0),
    "xdp_acquire_peeked_unchecked": ("R7 invalid mem access 'ptr_or_null_'", errno.EACCES),
    "xdp_acquire_node": ("dereference of modified rcu_ptr_ ptr R1 off=16 disallowed",
                         errno.EACCES),
    "xdp_refcount_access": ("direct access to bpf_refcount is disallowed", errno.EACCES),
    "xdp_acquire_leak": ("BPF_EXIT instruction in main prog would lead to reference leak",
                         errno.EINVAL),
}
GRAPH_LIST_PROCESSED = {"xdp_list_ok": 54, "xdp_push_unlocked": 19, "xdp_pop_unlocked": 10,
                        "xdp_wrong_node": 24, "xdp_use_after_unlock": 28, "xdp_pop_leak": 23,
                        "xdp_push_twice": 29, "xdp_push_null": 17, "xdp_head_access": 10,
                        "xdp_node_access": 7, "xdp_drop_in_lock": 20,
                        "xdp_peek_after_unlock": 21, "xdp_drop_peeked": 23,
                        "xdp_other_value_lock": 22, "xdp_acquire_plain": 8,
                        "xdp_acquire_owned": 19, "xdp_acquire_peeked_unchecked": 28,
                        "xdp_acquire_node": 22, "xdp_refcount_access": 7,
                        "xdp_acquire_leak": 13}


def test_graph_list_mistakes_get_linux_verdict() -> None:
    got, processed = _verdicts(Path(__file__).parent / "verifier_objects" / "graph_list.o")
    assert got == GRAPH_LIST
    assert processed == GRAPH_LIST_PROCESSED


# Linux 6.18's verdicts (reason, errno) on tests/verifier_objects/rbtree.o: BPF red-black
# trees used right and wrong (the lock, owned and non-owning nodes, the less callback:
# static, nothing but the tree's kfuncs and no unlock in it, R0 in [0, 1]),
# and the instructions Linux processed (tests/kernel/test_rbtree_kernel.py re-measures
# both).
RBTREE = {
    "xdp_rb_ok": (None, 0),
    "xdp_rb_walk": (None, 0),
    "xdp_remove_owned": (None, 0),
    "xdp_add_unlocked": ("bpf_spin_lock at off=0 must be held for bpf_rb_root", errno.EINVAL),
    "xdp_first_unlocked": ("bpf_spin_lock at off=0 must be held for bpf_rb_root",
                           errno.EINVAL),
    "xdp_wrong_node": ("operation on bpf_rb_root expects arg#1 bpf_rb_node at offset=8 in "
                       "struct tnode, but arg is at offset=16 in struct other", errno.EINVAL),
    "xdp_add_twice": ("arg#1 expected pointer to allocated object", errno.EINVAL),
    "xdp_use_after_unlock": ("R7 invalid mem access 'scalar'", errno.EACCES),
    "xdp_remove_after_unlock": ("bpf_rbtree_remove can only take non-owning or refcounted "
                                "bpf_rb_node pointer", errno.EINVAL),
    "xdp_remove_leak": ("BPF_EXIT instruction in main prog would lead to reference leak",
                        errno.EINVAL),
    "xdp_add_removed_unchecked": ("Possibly NULL pointer passed to trusted arg1",
                                  errno.EACCES),
    "xdp_remove_in_less": ("bpf_rbtree_remove not allowed in rbtree cb", errno.EINVAL),
    "xdp_first_in_less": (None, 0),
    "xdp_less_returns_two": ("At callback return the register R0 has smin=2 smax=2 should "
                             "have been in [0, 1]", errno.EINVAL),
    "xdp_left_in_less": ("bpf_rbtree_left not allowed in rbtree cb", errno.EINVAL),
    "xdp_helper_in_less": ("function calls are not allowed while holding a lock",
                           errno.EINVAL),
    "xdp_less_writes": (None, 0),
    "xdp_unlock_in_less": ("can't spin_{lock,unlock} in rbtree cb", errno.EACCES),
    "xdp_add_in_loop": (None, 0),
    "xdp_global_less": ("callback function not static", errno.EINVAL),
    "xdp_add_then_remove": (None, 0),
    "xdp_left_other_struct": ("operation on bpf_rb_root expects arg#1 bpf_rb_node at offset=8 "
                              "in struct tnode, but arg is at offset=8 in struct rnode",
                              errno.EINVAL),
    "xdp_root_access": ("bpf_rb_root cannot be accessed directly by load/store", errno.EACCES),
    "xdp_node_access": ("direct access to bpf_rb_node is disallowed", errno.EACCES),
    "xdp_drop_first": ("R1 must be referenced or trusted", errno.EINVAL),
    "xdp_tree_and_list": (None, 0),
    "xdp_add_refcounted_twice": (None, 0),
}
RBTREE_PROCESSED = {"xdp_rb_ok": 63, "xdp_rb_walk": 80, "xdp_remove_owned": 35,
                    "xdp_add_unlocked": 20, "xdp_first_unlocked": 11, "xdp_wrong_node": 23,
                    "xdp_add_twice": 30, "xdp_use_after_unlock": 27,
                    "xdp_remove_after_unlock": 31, "xdp_remove_leak": 25,
                    "xdp_add_removed_unchecked": 24, "xdp_remove_in_less": 28,
                    "xdp_first_in_less": 31, "xdp_less_returns_two": 20,
                    "xdp_left_in_less": 28, "xdp_helper_in_less": 28, "xdp_less_writes": 39,
                    "xdp_unlock_in_less": 20, "xdp_add_in_loop": 173, "xdp_global_less": 11,
                    "xdp_add_then_remove": 38, "xdp_left_other_struct": 12,
                    "xdp_root_access": 10, "xdp_node_access": 7, "xdp_drop_first": 21,
                    "xdp_tree_and_list": 76, "xdp_add_refcounted_twice": 55}


def test_rbtree_mistakes_get_linux_verdict() -> None:
    got, processed = _verdicts(Path(__file__).parent / "verifier_objects" / "rbtree.o")
    assert got == RBTREE
    assert processed == RBTREE_PROCESSED


# Linux 6.18's verdicts (reason, errno) on tests/verifier_objects/graph_obj.o: lists and
# trees whose root sits in an object of bpf_obj_new, under the object's own lock (held
# for the object, the owned one, at its offset), and the instructions Linux processed
# (measured with BPF_PROG_LOAD here; tests/kernel/test_verifier_kernel.py re-measures the
# verdicts).
GRAPH_OBJ = {
    "xdp_obj_list_ok": (None, 0), "xdp_obj_drop_full": (None, 0),
    "xdp_obj_tree_ok": (None, 0), "xdp_obj_nested_ok": (None, 0),
    "xdp_obj_stash_ok": (None, 0),
    "xdp_obj_push_unlocked": ("bpf_spin_lock at off=8 must be held for bpf_list_head",
                              errno.EINVAL),
    "xdp_obj_map_lock": ("bpf_spin_lock at off=8 must be held for bpf_list_head",
                         errno.EINVAL),
    "xdp_obj_other_lock": ("bpf_spin_lock at off=8 must be held for bpf_rb_root",
                           errno.EINVAL),
    "xdp_obj_non_owning": ("arg#0 expected pointer to map value or allocated object",
                           errno.EINVAL),
    "xdp_obj_no_lock": ("local 'kptr' has no valid bpf_spin_lock", errno.EINVAL),
    "xdp_obj_lock_off": ("off 0 doesn't point to 'struct bpf_spin_lock' that is at 8",
                         errno.EINVAL),
    "xdp_obj_lock_access": ("direct access to bpf_spin_lock is disallowed", errno.EACCES),
    "xdp_obj_unlock_other": ("bpf_spin_unlock of different lock", errno.EINVAL),
    "xdp_obj_drop_locked": ("function calls are not allowed while holding a lock",
                            errno.EINVAL),
    "xdp_obj_use_after_push": ("R1 type=scalar expected=map_value, ptr_", errno.EACCES),
    # one call clang merged for two types: for bpf_obj_new two sizes or records, for
    # bpf_obj_drop two records
    "xdp_merged_new_same_size": (None, 0),
    "xdp_merged_new": ("or mark the callee with __attribute__((nomerge))", errno.EINVAL),
    "xdp_merged_drop_plain": (None, 0),
    "xdp_merged_drop": ("or mark the callee with __attribute__((nomerge))", errno.EINVAL),
}
GRAPH_OBJ_PROCESSED = {
    "xdp_obj_list_ok": 60, "xdp_obj_drop_full": 60, "xdp_obj_tree_ok": 66,
    "xdp_obj_nested_ok": 56, "xdp_obj_stash_ok": 44, "xdp_obj_push_unlocked": 16,
    "xdp_obj_map_lock": 27, "xdp_obj_other_lock": 27, "xdp_obj_non_owning": 26,
    "xdp_obj_no_lock": 7, "xdp_obj_lock_off": 7, "xdp_obj_lock_access": 6,
    "xdp_obj_unlock_other": 16, "xdp_obj_drop_locked": 12, "xdp_obj_use_after_push": 26,
    "xdp_merged_new_same_size": 28, "xdp_merged_new": 20, "xdp_merged_drop_plain": 28,
    "xdp_merged_drop": 25}


def test_graph_roots_in_objects_get_linux_verdict() -> None:
    got, processed = _verdicts(Path(__file__).parent / "verifier_objects" / "graph_obj.o")
    assert got == GRAPH_OBJ
    assert processed == GRAPH_OBJ_PROCESSED


@pytest.mark.parametrize("name", ["graph_obj_nolock", "graph_obj_loop"])
def test_graph_roots_linux_refuses_in_btf(name: str) -> None:
    # a root without its lock, a node holding roots of roots: Linux refuses the object's
    # BTF, libbpf loads without it, and bpf_obj_new finds no program BTF (the kernel test
    # re-measures both)
    got, processed = _verdicts(Path(__file__).parent / "verifier_objects" / f"{name}.o")
    assert got == {f"xdp_{name[6:]}": ("bpf_obj_new/bpf_percpu_obj_new requires prog BTF",
                                       errno.EINVAL)}
    assert processed == {f"xdp_{name[6:]}": 3}


# Linux 6.18's verdicts on tests/verifier_objects/kfunc_refused.o: sleepable kfuncs and
# __bpf_trap, refused where the walk reaches the call (the kernel test re-measures them).
KFUNC_REFUSED = {
    "xdp_copy_user": ("program must be sleepable to call sleepable kfunc "
                      "bpf_copy_from_user_str", errno.EACCES),
    "xdp_user_key": ("program must be sleepable to call sleepable kfunc bpf_lookup_user_key",
                     errno.EACCES),
    "xdp_trap": ("unexpected __bpf_trap() due to uninitialized variable?", errno.EFAULT),
}


def test_sleepable_kfuncs_and_trap_refused_as_linux() -> None:
    spec = load_collection_spec(Path(__file__).parent / "verifier_objects" /
                                "kfunc_refused.o")
    got = {}
    # refused at load, before either engine has the program (the last one: the JIT's)
    for n, (name, prog) in enumerate(spec.programs.items()):
        engine = "jit" if n == len(spec.programs) - 1 and jit_available() else "interp"
        with pytest.raises(VerifierError) as e:
            Collection(replace(spec, programs={name: prog}), engine=engine)
        got[name] = (e.value.reason, e.value.errno)
    assert got == KFUNC_REFUSED


# Linux 6.18's verdicts on tests/verifier_objects/exceptions.o (bpf_throw), and what its
# xdp_throw returns for each of EXCEPTION_RUNS under BPF_PROG_TEST_RUN (the kernel test
# re-measures both).
EXCEPTIONS = {
    "xdp_throw": (None, 0),
    "xdp_throw_leak": ("bpf_throw would lead to reference leak", errno.EINVAL),
    "xdp_throw_in_callback": ("bpf_throw kfunc (insn 10) cannot be called from callback "
                              "subprog 1", errno.EINVAL),
    "xdp_throw_pointer": ("R1 is not a scalar", errno.EINVAL),
}
EXCEPTIONS_OBJ = Path(__file__).parent / "verifier_objects" / "exceptions.o"
# short: thrown by main; 0xff first: by a static function, the cookie's high word dropped;
# longer than 1000 bytes: by a global function
EXCEPTION_RUNS = ((bytes(15), 1), (bytes([0xFF]) * 20, 3), (bytes([7]) * 20, 1),
                  (bytes([8]) * 21, 2), (bytes([7]) * 1200, 0), (bytes([0xFF]) * 1200, 3))


def test_exceptions_get_linux_verdict() -> None:
    got, processed = _verdicts(EXCEPTIONS_OBJ)
    assert got == EXCEPTIONS
    assert all(processed[n] == 45 for n, (reason, _) in got.items() if reason is None)


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_throw_unwinds_to_the_cookie(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    from pyxdp.testing.native import python_calls
    from pyxdp.vm import bpf_exception

    spec = load_collection_spec(EXCEPTIONS_OBJ)
    with Collection(replace(spec, programs={"xdp_throw": spec.programs["xdp_throw"]}),
                    engine=engine) as c:
        prog = c.programs["xdp_throw"]
        got = []
        calls = python_calls((bpf_exception.bpf_throw,), lambda: got.extend(
            (pkt, prog.test_run(pkt)) for pkt, _ in EXCEPTION_RUNS))
    assert [(pkt, r.retval) for pkt, r in got] == list(EXCEPTION_RUNS)
    assert all(r.fault is None for _, r in got)
    assert calls == (0 if engine == "jit" else 4)  # the JIT throws natively


EXCEPTION_CB_OBJ = Path(__file__).parent / "verifier_objects" / "exception_cb.o"
# frame length -> what Linux returns (tests/kernel/test_exceptions_kernel.py): the callback
# maps cookie 7 to XDP_TX and others to XDP_DROP; xdp_throw_plain returns its cookie
EXCEPTION_CB_RUNS = {"xdp_throw_cb": ((15, 3), (30, 2), (1200, 1)),
                     "xdp_throw_plain": ((15, 3), (30, 2), (1200, 2))}


def test_loader_appends_the_exception_callback_as_libbpf() -> None:
    spec = load_collection_spec(EXCEPTION_CB_OBJ)
    cb = spec.programs["xdp_throw_cb"]
    assert [(f.name, f.pc) for f in cb.functions] == [("xdp_throw_cb", 0),
                                                      ("xdp_exc_cb", 10)]
    assert [(fi.insn_off, fi.name) for fi in cb.func_info] == [(0, "xdp_throw_cb"),
                                                               (10, "xdp_exc_cb")]
    assert [f.name for f in spec.programs["xdp_throw_plain"].functions] == ["xdp_throw_plain"]
    # bpf_prog_assign_exc_cb's refusals, one line each
    raw = EXCEPTION_CB_OBJ.read_bytes()
    missing = raw.replace(b"exception_callback:xdp_exc_cb", b"exception_callback:xdp_exc_cX")
    with pytest.raises(ObjectError, match="prog 'xdp_throw_cb': cannot find exception "
                       "callback 'xdp_exc_cX'"):
        load_collection_spec(missing)


def test_exception_callback_lookup_refusals() -> None:
    """bpf_find_exception_callback_insn_off's refusals (lines and errnos), on variants
    of xdp_throw_cb's BTF and func_info; the verifier reports them as they are."""
    from pyxdp.btf.btf import BTF_FUNC_STATIC, Btf, BtfKind
    from pyxdp.spec import ExceptionCallbackError, exception_callback

    spec = load_collection_spec(EXCEPTION_CB_OBJ)
    prog, btf = spec.programs["xdp_throw_cb"], spec.btf
    assert btf is not None and exception_callback(prog, btf) == 10
    assert exception_callback(spec.programs["xdp_throw_plain"], btf) == 0
    tag = next(t for t in btf.types if t.kind is BtfKind.DECL_TAG
               and t.name == "exception_callback:xdp_exc_cb")
    cb = btf.types[btf.find("xdp_exc_cb", BtfKind.FUNC) or 0]
    (cb_info,) = [fi for fi in prog.func_info if fi.name == "xdp_exc_cb"]
    variants = [
        # a second tag, appended (BTF Linux takes: a refused one is loaded without)
        (Btf(types=(*btf.types, replace(tag, id=len(btf.types))), strings=btf.strings),
         prog, "multiple exception callback tags for main subprog", errno.EEXIST),
        (btf.with_types({tag.id: replace(tag, name="exception_callback:nope")}), prog,
         "exception callback 'nope' could not be found in BTF", errno.ENOENT),
        (btf.with_types({cb.id: replace(cb, linkage=BTF_FUNC_STATIC, vlen=BTF_FUNC_STATIC)}),
         prog, "exception callback 'xdp_exc_cb' must have global linkage", errno.EINVAL),
        (btf, replace(prog, func_info=prog.func_info[:1]),
         "exception callback type id not found in func_info", errno.EINVAL),
        (btf, replace(prog, func_info=(*prog.func_info, replace(cb_info, insn_off=0))),
         "invalid exception callback insn_off in func_info: 0", errno.EINVAL),
    ]
    for variant_btf, variant, msg, err in variants:
        with pytest.raises(ExceptionCallbackError) as e:
            exception_callback(variant, variant_btf)
        assert (e.value.message, e.value.errno) == (msg, err)
        with pytest.raises(VerifierError) as v:
            verify(variant, spec.maps, btf=variant_btf)
        assert (v.value.reason, v.value.errno) == (msg, err)


# Linux 6.18's verdicts on tests/verifier_objects/exception_cb.o (the kernel test
# re-measures them): the callback's rules (one scalar argument, no throw, not called)
EXCEPTION_CB = {
    "xdp_throw_cb": (None, 0),
    "xdp_throw_plain": (None, 0),
    "xdp_cb_two_args": ("exception cb only supports single integer argument", errno.EINVAL),
    "xdp_cb_throws": ("bpf_throw kfunc (insn 9) cannot be called from callback subprog 1",
                      errno.EINVAL),
    "xdp_cb_called": ("insn 10 cannot call exception cb directlyprocessed 14 insns (limit "
                      "1000000) max_states_per_insn 0 total_states 1 peak_states 1 "
                      "mark_read 0", errno.EINVAL),
}


def test_exception_callbacks_get_linux_verdict() -> None:
    got, processed = _verdicts(EXCEPTION_CB_OBJ)
    assert got == EXCEPTION_CB
    assert (processed["xdp_throw_cb"], processed["xdp_throw_plain"]) == (16, 8)  # Linux's


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_throw_returns_what_the_callback_returns(engine: str) -> None:
    """A throw calls the program's own callback with the cookie (natively on the JIT)
    and the run returns its value; without one, the cookie (on the JIT a throw that
    ends its block leaves at once: the rest of the block does not run)."""
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    from pyxdp.testing.native import python_calls
    from pyxdp.vm import bpf_exception

    spec = load_collection_spec(EXCEPTION_CB_OBJ)
    runs = {n: spec.programs[n] for n in EXCEPTION_CB_RUNS}
    got: dict[str, list[tuple[int, Any]]] = {}
    with Collection(replace(spec, programs=runs), engine=engine) as c:
        def run() -> None:
            for name, cases in EXCEPTION_CB_RUNS.items():
                prog = c.programs[name]
                got[name] = [(n, prog.test_run(bytes(n))) for n, _ in cases]
        calls = python_calls((bpf_exception.bpf_throw,), run)
    assert {n: tuple((k, r.retval) for k, r in rs) for n, rs in got.items()} == \
        EXCEPTION_CB_RUNS
    assert all(r.fault is None for rs in got.values() for _, r in rs)
    assert calls == (0 if engine == "jit" else 3)  # three of the runs throw


def test_issue_example_refused_with_linux_line_pc_source_and_state() -> None:
    with pytest.raises(VerifierError) as e:
        Collection.load(SAMPLES / "unchecked.o")
    err = e.value
    assert err.reason == "R1 offset is outside of the packet"
    assert err.pc == 2 and err.insn == "r2 = *(u8 *)(r1 +23)"
    assert err.source.startswith("unchecked.c:20:")
    assert "R1=pkt(r=0)" in err.state and "R10=fp0" in err.state
    assert err.log.splitlines()[-2] == err.reason
    assert "\n" not in str(err) and str(err).startswith("xdp_unchecked: verifier failed")


def test_verify_false_keeps_runtime_checks() -> None:
    with Collection.load(SAMPLES / "unchecked.o", verify=False) as c:
        r = c.programs["xdp_unchecked"].test_run(bytes(14))
        assert r.retval == XdpAction.XDP_ABORTED and r.fault is not None


def test_host_load_verifies() -> None:
    with Host() as host:
        with pytest.raises(VerifierError, match="R1 offset is outside of the packet"):
            host.load(SAMPLES / "unchecked.o")
        coll = host.load(SAMPLES / "unchecked.o", verify=False)
        assert "xdp_unchecked" in coll.programs


def test_verify_refuses_other_program_types() -> None:
    """A program of a type pyxdp's verifier does not model is not judged by XDP's rules:
    one line, no verdict (the CLI lists it as not verified and goes on)."""
    prog = ProgramSpec("tc_prog", "tc", (), prog_type="sched_cls", expected_attach_type=0)
    with pytest.raises(NotSupportedError, match=r"^tc_prog: pyxdp's verifier checks XDP and "
                       r"syscall programs only, not a sched_cls program \(section 'tc'\)$"):
        verify(prog, {})


def test_syscall_programs_verified_as_syscall(capsys: pytest.CaptureFixture[str]) -> None:
    """SEC("syscall") programs get their own type's rules (tests/verifier_objects/
    syscall_prog.o, Linux's verdicts re-measured by the kernel objects test); a program
    of a type not modelled is listed by the CLI as not verified."""
    got, _ = _verdicts(Path(__file__).parent / "verifier_objects" / "syscall_prog.o",
                       types=("xdp", "syscall"))
    assert got == {n: (None, 0) for n in ("sys_store", "sys_null", "sys_wide", "xdp_get")}
    assert main(["prog", "verify", str(SAMPLES / "mixed.o"), "-s", "tc_count"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "tc_count (tc): not verified",
        "  tc_count: pyxdp's verifier checks XDP and syscall programs only, not a sched_cls "
        "program (section 'tc')"]


def test_cli_prog_verify(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prog", "verify", str(SAMPLES / "unchecked.o")]) == 1
    out = capsys.readouterr().out
    assert "xdp_unchecked (xdp): refused" in out
    assert "  R1 offset is outside of the packet" in out.splitlines()
    assert main(["prog", "verify", str(SAMPLES / "xdp1.o"), "--log-level", "2"]) == 0
    out = capsys.readouterr().out
    assert "xdp_prog1 (xdp): accepted" in out and "processed" in out


def test_cli_prog_run_refuses_in_one_line(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    pkt = tmp_path / "pkt.bin"
    pkt.write_bytes(bytes(14))
    obj = str(SAMPLES / "unchecked.o")
    assert main(["prog", "run", obj, "--data-in", str(pkt)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "R1 offset is outside of the packet at pc 2" in err
    assert main(["prog", "run", obj, "--data-in", str(pkt), "--no-verify"]) == 0
    assert "Return value: 0" in capsys.readouterr().out


def test_complexity_limit() -> None:
    case = next(c for c in CASES if c.name == "bounded_loop")
    spec = case.spec()
    (prog,) = spec.programs.values()
    with pytest.raises(VerifierError, match="BPF program is too large. Processed 11 insn"):
        verify(prog, spec.maps, limit=10)


def test_tnum_ops_are_sound() -> None:
    import random
    rnd = random.Random(7)
    for _ in range(300):
        lo = rnd.randrange(0, 1 << 16)
        hi = lo + rnd.randrange(0, 1 << 12)
        a, b = t_range(lo, hi), t_range(hi, hi + rnd.randrange(0, 300))
        x, y = rnd.randint(lo, hi), rnd.randint(b[0], b[0] | b[1])
        if not t_in(b, (y, 0)):
            continue
        m = (1 << 64) - 1
        for f, v in ((t_add, x + y), (t_sub, x - y), (t_and, x & y), (t_mul, x * y)):
            assert t_in(f(a, b), (v & m, 0)), f.__name__


def test_verifier_imports_only_the_spec_level() -> None:
    import ast
    root = Path(__file__).resolve().parents[1]
    allowed = ("pyxdp.asm", "pyxdp.uapi", "pyxdp.spec", "pyxdp.errors", "pyxdp.verifier",
               "pyxdp.btf", "pyxdp.kernel.verifier_log")
    bad = []
    for p in sorted((root / "pyxdp" / "verifier").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            bad += [f"{p.name}: {n}" for n in names
                    if n.startswith("pyxdp") and not n.startswith(allowed)]
    assert bad == []


def test_core_program_is_verified_as_relocated() -> None:
    spec = load_collection_spec(SAMPLES / "core.o")
    prog = spec.programs["xdp_core"]
    with pytest.raises(CoreRelocationError):  # no BTF of its own: nothing to relocate from
        verify(prog, spec.maps)
    assert verify(prog, spec.maps, btf=spec.btf).insns_processed > 0


def test_device_bound_metadata_program_is_accepted() -> None:
    spec = load_collection_spec(SAMPLES / "rx_meta.o")
    res = verify(spec.programs["xdp_rx_meta"].bound_to(1), spec.maps)
    assert res.insns_processed > 0


def test_trusted_global_argument_struct_from_kernel_btf() -> None:
    # btf_get_ptr_to_btf_id: CO-RE's candidates in the kernel's BTF - nf_conn___init is a
    # flavour of nf_conn, so nf_conn is ambiguous; xfrm_state has one match
    from pyxdp.btf.vmlinux import core_target

    kernel = core_target()
    assert len(kernel.find_flavours("nf_conn")) >= 2
    assert len([c for c in kernel.find_flavours("xfrm_state")
                if kernel.type_by_id(c).name == "xfrm_state"]) == 1


def test_kfunc_table_is_open_by_name() -> None:
    case = VerifierCase("kf", "r1 = 7\ncall KFUNC(bpf_example_kfunc)\nexit", None)
    spec = case.spec()
    (prog,) = spec.programs.values()
    with pytest.raises(UnsupportedHelper, match="kfunc bpf_example_kfunc is not modelled"):
        verify(prog, spec.maps)
    register_kfunc("bpf_example_kfunc", KfuncProto((KParam(KArg.SCALAR),)))
    try:
        assert verify(prog, spec.maps).insns_processed == 3
        bad = VerifierCase("kf", "r1 = r10\ncall KFUNC(bpf_example_kfunc)\nexit", None).spec()
        with pytest.raises(VerifierError, match="R1 is not a scalar"):
            verify(next(iter(bad.programs.values())), bad.maps)
    finally:
        del KFUNCS["bpf_example_kfunc"]
