"""Program-allocated objects against Linux: samples/local_kptr.o (bpf_obj_new, bpf_kptr_xchg
into an ARRAY value's __kptr field, bpf_obj_drop) over the packet corpus and packets that
fill and empty the slots, under BPF_PROG_TEST_RUN on Linux and on pyxdp's interpreter and
JIT: the same verdicts and the same map contents (the __kptr field reads as zero from user
space on both); and xdp_local_kptr_global, whose __kptr is a global variable. The
verifier's verdicts on the usual mistakes are tests/verifier_objects/local_kptr.o's
(tests/kernel/test_verifier_kernel.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.packets import corpus
from pyxdp.net.prog import jit_available

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[2] / "samples" / "local_kptr.o"
PERCPU = Path(__file__).resolve().parents[1] / "verifier_objects" / "percpu_kptr.o"
# After the corpus: take slot 3's object out, put one in slot 1, take it out, find
# slot 1 empty (XDP_PASS), then fill slot 1 again.
TAIL = [bytes([0xFF]) * 40, bytes([1]) * 70, bytes([0xFF]) * 41, bytes([0xFF]) * 40,
        bytes([5]) * 33]


def _run(coll: Collection, pkt: bytes, prog: str = "xdp_local_kptr") -> tuple[object, ...]:
    try:
        r = coll.programs[prog].test_run(pkt)
    except Exception as e:  # the kernel refusing an input must be matched by pyxdp
        return (type(e).__name__, getattr(e, "errno", None))
    return (r.retval, r.data_out)


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_local_kptr_matches_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = load_collection_spec(OBJ)
    pkts = [p for _, p in corpus(1)] + TAIL
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        verdicts = []
        for pkt in pkts:
            k, u = _run(kern, pkt), _run(user, pkt)
            assert u == k, pkt[:16].hex()
            verdicts.append(k[0])
        slots = [kern.maps["slots"][i] for i in range(4)]
        assert [user.maps["slots"][i] for i in range(4)] == slots
        # the same objects kept in a global __kptr variable (.bss)
        for pkt in pkts[:8]:
            assert _run(user, pkt, "xdp_local_kptr_global") == \
                _run(kern, pkt, "xdp_local_kptr_global")
        assert user.maps[".bss"][0] == kern.maps[".bss"][0]
    assert {1, 2} <= set(verdicts)
    assert all(s["flow"] == 0 for s in slots) and sum(s["replaced"] for s in slots) > 10
    assert sum(s["peeked"] for s in slots) > 0


def test_percpu_objects_run_as_pinned() -> None:
    """tests/verifier_objects/percpu_kptr.o's counting programs under BPF_PROG_TEST_RUN on
    Linux give the verdicts and total tests/test_local_kptr.py pins for pyxdp's
    interpreter and JIT (PERCPU_LINUX_RUNS, PERCPU_LINUX_TOTAL)."""
    spec = load_collection_spec(PERCPU)
    spec = replace(spec, programs={n: spec.programs[n] for n in (
        "xdp_pcpu_count", "xdp_pcpu_sum", "xdp_pcpu_take")})
    runs = (("xdp_pcpu_sum", 1), *(("xdp_pcpu_count", 2),) * 5, ("xdp_pcpu_sum", 2),
            ("xdp_pcpu_take", 2), ("xdp_pcpu_take", 1), ("xdp_pcpu_sum", 1),
            ("xdp_pcpu_count", 2), ("xdp_pcpu_count", 2), ("xdp_pcpu_sum", 2))
    with Collection(spec, "kernel") as kern:
        got = [(p, kern.programs[p].test_run(bytes(60 + i)).retval)
               for i, (p, _) in enumerate(runs)]
        assert got == list(runs)
        assert kern.maps["vals"][0] == {"total": 1, "pc": 0, "o": 0}
