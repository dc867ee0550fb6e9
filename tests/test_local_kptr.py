"""Program-allocated objects (pyxdp.vm.memalloc): samples/local_kptr.o on both engines
keeps one object per slot in the arena, frees the one it replaces (natively on the JIT)
and the one a map update overwrites; tests/kernel/test_local_kptr_kernel.py compares the
sample with Linux, tests/test_verifier.py the verifier's verdicts on the usual mistakes."""

from __future__ import annotations

import errno
import gc
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import VerifierError
from pyxdp.net.prog import jit_available
from pyxdp.spec import CollectionSpec
from pyxdp.testing.native import python_calls
from pyxdp.uapi.bpf import XdpAction
from pyxdp.verifier import verify
from pyxdp.vm import memalloc, memalloc_percpu
from pyxdp.vm.memalloc import ObjArena, arena

OBJ = Path(__file__).resolve().parents[1] / "samples" / "local_kptr.o"


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_objects_live_in_the_arena_until_dropped(engine: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    gc.collect()  # maps of earlier tests drop their objects now, not in the middle
    frees: list[int] = []
    free = ObjArena.free

    def counted(self: ObjArena, addr: int) -> None:
        frees.append(addr)
        free(self, addr)

    monkeypatch.setattr(ObjArena, "free", counted)
    with Collection.load(OBJ, engine=engine) as c:
        prog = c.programs["xdp_local_kptr"]
        before = arena().live()
        for first in (0, 1, 1, 2, 2, 2):
            assert prog.test_run(bytes([first]) * 50).retval == 2
        assert arena().live() - before == 3  # one object per slot used
        s = c.maps["slots"]
        assert s[2]["replaced"] == 2 and s[2]["bytes"] == 100 and s[2]["flow"] == 0
        assert prog.test_run(bytes([0xFF]) * 50).retval == 2  # slot 3 is empty: PASS
        # the objects program runs dropped were freed natively on the JIT
        assert len(frees) == (0 if engine == "jit" else 3)
        s[1] = {"replaced": 0, "bytes": 0, "peeked": 0, "flow": 0}  # frees slot 1's
        assert arena().live() - before == 2 and len(frees) == (1 if engine == "jit" else 4)
        del prog, s
    del c
    gc.collect()  # the map went: the objects its values held are dropped (bpf_map_free)
    assert arena().live() == before


def test_allocator_classes_and_reuse() -> None:
    a = ObjArena(1 << 16)
    x = a.alloc(8)
    y = a.alloc(4088)
    assert a.alloc(4089) == 0 and a.alloc(0) == 0  # no size class holds it
    a.buf[x - memalloc.ARENA_BASE] = 7
    a.free(x)
    assert a.alloc(1) == x and a.buf[x - memalloc.ARENA_BASE] == 0  # reused, zeroed
    with pytest.raises(Exception, match="not a live object"):
        a.free(y)
        a.free(y)
    assert a.live() == 1


PERCPU = Path(__file__).parent / "verifier_objects" / "percpu_kptr.o"
# Linux 6.18's verdicts (reason, errno) on tests/verifier_objects/percpu_kptr.o, and its
# processed counts on the programs it accepts (tests/kernel/test_verifier_kernel.py and
# tests/kernel/test_local_kptr_kernel.py re-measure them).
PERCPU_VERDICTS = {
    "xdp_pcpu_count": (None, 0), "xdp_pcpu_sum": (None, 0), "xdp_pcpu_take": (None, 0),
    "xdp_pcpu_unchecked_cpu": (None, 0),
    "xdp_pcpu_deref": ("R0 is ptr_cnt access percpu memory: off=0", errno.EACCES),
    "xdp_pcpu_this_new": ("R1 type=percpu_ptr_ expected=percpu_ptr_, percpu_rcu_ptr_, "
                          "percpu_trusted_ptr_", errno.EACCES),
    "xdp_pcpu_not_scalars": ("bpf_percpu_obj_new type ID argument must be of a struct of "
                             "scalars", errno.EINVAL),
    "xdp_pcpu_too_big": ("bpf_percpu_obj_new type size (520) is greater than 512",
                         errno.EINVAL),
    "xdp_pcpu_plain_drop": ("arg#0 expected for bpf_percpu_obj_drop_impl()", errno.EINVAL),
    "xdp_obj_percpu_drop": ("arg#0 expected for bpf_obj_drop_impl()", errno.EINVAL),
    "xdp_pcpu_leak": ("BPF_EXIT instruction in main prog would lead to reference leak",
                      errno.EINVAL),
    "xdp_pcpu_into_kptr": ("invalid kptr access, R2 type=percpu_ptr_ expected=ptr_cnt",
                           errno.EACCES),
    "xdp_obj_into_pcpu": ("invalid kptr access, R2 type=ptr_ expected=ptr_cnt", errno.EACCES),
    "xdp_pcpu_kptr_deref": ("R1 is ptr_cnt access percpu memory: off=0", errno.EACCES),
    "xdp_pcpu_store": ("store to referenced kptr disallowed", errno.EACCES),
    "xdp_pcpu_no_null_check": ("R1 type=percpu_rcu_ptr_or_null_ expected=percpu_ptr_, "
                               "percpu_rcu_ptr_, percpu_trusted_ptr_", errno.EACCES),
    "xdp_pcpu_given_read": (None, 0),
    "xdp_pcpu_given_drop": ("R1 must be referenced or trusted", errno.EINVAL),
}
PERCPU_PROCESSED = {"xdp_pcpu_count": 109, "xdp_pcpu_sum": 80, "xdp_pcpu_take": 21,
                    "xdp_pcpu_unchecked_cpu": 20, "xdp_pcpu_given_read": 35}
PERCPU_RUN = ("xdp_pcpu_count", "xdp_pcpu_sum", "xdp_pcpu_take", "xdp_pcpu_unchecked_cpu")
# Runs (program, Linux's verdict) from an empty map under BPF_PROG_TEST_RUN, slot 0's
# total after them Linux's (tests/kernel/test_local_kptr_kernel.py re-measures both).
PERCPU_LINUX_RUNS = (("xdp_pcpu_sum", 1), *(("xdp_pcpu_count", 2),) * 5, ("xdp_pcpu_sum", 2),
                     ("xdp_pcpu_take", 2), ("xdp_pcpu_take", 1), ("xdp_pcpu_sum", 1),
                     ("xdp_pcpu_count", 2), ("xdp_pcpu_count", 2), ("xdp_pcpu_sum", 2))
PERCPU_LINUX_TOTAL = 1


def test_percpu_objects_get_linux_verdict() -> None:
    spec = load_collection_spec(PERCPU)
    got: dict[str, tuple[str | None, int]] = {}
    for name, prog in spec.programs.items():
        try:
            n = verify(prog, spec.maps, btf=spec.btf).insns_processed
            assert n == PERCPU_PROCESSED[name], name
            got[name] = (None, 0)
        except VerifierError as e:
            got[name] = (e.reason, e.errno)
    assert got == PERCPU_VERDICTS


def percpu_spec() -> CollectionSpec:
    """percpu_kptr.o's programs Linux accepts."""
    spec = load_collection_spec(PERCPU)
    return replace(spec, programs={n: spec.programs[n] for n in PERCPU_RUN})


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_percpu_objects_count_per_cpu(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    gc.collect()
    before = arena().live()
    natives = (memalloc_percpu._per_cpu_ptr, memalloc_percpu._this_cpu_ptr, memalloc.obj_drop)
    with Collection(percpu_spec(), engine=engine, nr_cpus=2) as c:
        p = {n: c.programs[n] for n in PERCPU_RUN}
        got = [(n, p[n].test_run(bytes(60 + i)).retval)
               for i, (n, _) in enumerate(PERCPU_LINUX_RUNS)]
        assert got == list(PERCPU_LINUX_RUNS)  # as Linux runs them
        assert c.maps["vals"][0]["total"] == PERCPU_LINUX_TOTAL
        assert p["xdp_pcpu_take"].test_run(bytes(60)).retval == 2
        assert p["xdp_pcpu_sum"].test_run(bytes(60)).retval == XdpAction.XDP_DROP  # none yet
        assert p["xdp_pcpu_count"].test_run(bytes(60)).retval == 2  # made and stored
        assert arena().live() - before == 1

        def count() -> None:
            for n in (61, 62, 63):  # CPU 0 (test_run's), then CPU 1
                p["xdp_pcpu_count"].test_run(bytes(n))
            frames = np.zeros((2, 256), np.uint8)
            p["xdp_pcpu_count"].handle.run_batch(frames, [0, 0], [70, 80], cpu=1)
            assert p["xdp_pcpu_sum"].test_run(bytes(60)).retval == 2
            # CPU 1's copy counted
            assert p["xdp_pcpu_unchecked_cpu"].test_run(bytes(60)).retval == 1
            assert p["xdp_pcpu_take"].test_run(bytes(60)).retval == 2  # dropped
        py = python_calls(natives, count)
        # this_cpu_ptr x5, per_cpu_ptr x3 (CPU 2 is NULL) + x1, bpf_percpu_obj_drop x1
        assert py == (0 if engine == "jit" else 10)
        assert c.maps["vals"][0] == {"total": 5, "pc": 0, "o": 0}
        assert arena().live() == before
        assert p["xdp_pcpu_take"].test_run(bytes(60)).retval == XdpAction.XDP_DROP  # empty
        p["xdp_pcpu_count"].test_run(bytes(60))  # a new one, left in the map
        assert arena().live() - before == 1
        p.clear()
    del c
    gc.collect()  # the map went: its per-CPU object was dropped with it
    assert arena().live() == before
