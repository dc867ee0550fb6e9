"""The verifier's facts in the JIT: proven accesses lose their checks, and nothing else moves.

A verified program's packet, stack and map value accesses are compiled without a
bounds check or fault record (the IR shows it); the same object loaded with
``verify=False`` keeps every check. Random programs the verifier accepts run the
same on the interpreter and on the JIT with the facts: verdicts, packets, faults
and maps.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llvmlite")

from pyxdp.asm import opcodes as op  # noqa: E402
from pyxdp.collection import Collection  # noqa: E402
from pyxdp.errors import VerifierError  # noqa: E402
from pyxdp.net.packets import udp_packet  # noqa: E402
from pyxdp.net.prog import XdpProg  # noqa: E402
from pyxdp.testing.verifier_fuzz import random_case  # noqa: E402
from pyxdp.vm.jit.abi import ST_READ, ST_WRITE  # noqa: E402
from pyxdp.vm.jit.engine import compile_together  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def _fault_sites(prog: XdpProg) -> set[int]:
    """The pcs whose memory access can record a fault in the program's JIT code."""
    ir = prog.vm.ir  # type: ignore[union-attr]
    sites = set()
    # Each function's one access-fault block: phis of the status, then of the pc, by edge.
    for block in ir.split("\nfaulted:\n")[1:]:
        status, pcs = ({lbl: int(v) for v, lbl in re.findall(r"\[ (-?\d+), %([\w.]+) \]", line)}
                       for line in block.split("\n")[:2])
        sites |= {pc for lbl, pc in pcs.items() if status[lbl] in (ST_READ, ST_WRITE)}
    return sites


def _handle(coll: Collection, name: str) -> XdpProg:
    h = coll.programs[name].handle
    assert isinstance(h, XdpProg)
    return h


@pytest.mark.parametrize("obj,name", [("xdp2.o", "xdp_prog2"), ("lb.o", "lb_ingress")])
def test_proven_accesses_have_no_check_unverified_keep_theirs(obj: str, name: str) -> None:
    with Collection.load(SAMPLES / obj, engine="jit") as v, \
            Collection.load(SAMPLES / obj, engine="jit", verify=False) as u:
        verified, unverified = _handle(v, name), _handle(u, name)
        assert not unverified.facts
        pkt = {pc for pc, f in verified.facts.items() if f.only("pkt")
               and verified.spec.insns[pc].cls in (op.BPF_LDX, op.BPF_ST, op.BPF_STX)}
        assert len(pkt) > 10
        checked_v, checked_u = _fault_sites(verified), _fault_sites(unverified)
        # Unverified: every packet access can fault; verified: none (nor any other access
        # of a kind the JIT places: the stack, one map's values).
        assert pkt <= checked_u
        assert not pkt & checked_v
        assert len(checked_v) < len(checked_u) // 4
        pkt_in = udp_packet(b"facts")
        for short in (pkt_in, pkt_in[:14], pkt_in[:30]):
            a, b = v.programs[name].test_run(short), u.programs[name].test_run(short)
            assert (a.retval, a.data_out, a.fault) == (b.retval, b.data_out, b.fault)


def _outcome(coll: Collection, packets: list[bytes]) -> list[Any]:
    out: list[Any] = []
    prog = next(iter(coll.programs.values()))
    for data in packets:
        r = prog.test_run(data)
        out.append((int(r.retval), r.data_out,
                    None if r.fault is None else (type(r.fault).__name__, str(r.fault))))
    for name, m in sorted(coll.maps.items()):
        if m.spec.type_name in ("array", "hash", "percpu_array"):
            out.append((name, repr(m.dump())))
    return out


def test_verified_random_programs_agree_with_the_interpreter() -> None:
    """Programs with the bugs people write, where the verifier accepts them: the JIT with
    the facts (at -O0, one module) gives the interpreter's outcome on packets short and
    long (bounds checks go both ways)."""
    rnd = random.Random(12)
    packets = [bytes(rnd.randrange(256) for _ in range(n)) for n in (14, 17, 34, 47, 60, 128)]
    pairs = []
    with compile_together(0):
        for seed in range(700):
            case = random_case(random.Random(seed))
            try:
                interp = Collection(case.spec(), "userspace", engine="interp")
            except VerifierError:
                continue
            pairs.append((seed, interp, Collection(case.spec(), "userspace", engine="jit")))
    assert len(pairs) >= 60
    proven = 0
    for seed, interp, jit in pairs:
        with interp, jit:
            h = next(iter(jit.programs.values())).handle
            assert isinstance(h, XdpProg) and h.facts
            proven += sum(1 for f in h.facts.values() if f.only("pkt", "fp", "map_value"))
            assert _outcome(jit, packets) == _outcome(interp, packets), f"seed {seed}"
    assert proven > 100


def test_budget_runs_out_anywhere_in_a_verified_program() -> None:
    """The budget tests a verified program's JIT code leaves out (proven loads; proven
    stores when the budget covers the whole block): with every budget from 1 to past
    the end, the run stops at the interpreter's pc with the interpreter's partial
    packet rewrite (xdp2 swaps the MACs with byte stores)."""
    import numpy as np

    with Collection.load(SAMPLES / "xdp2.o", engine="interp") as coll:
        spec = coll.spec.programs["xdp_prog2"]
        facts = _handle(coll, "xdp_prog2").facts
        maps = {n: m.handle for n, m in coll.maps.items()}
        pkt = np.frombuffer(udp_packet(b"budget"), np.uint8)
        frames = np.zeros((1, 512), np.uint8)
        frames[0, 256:256 + len(pkt)] = pkt
        with compile_together(2):
            pairs = [(XdpProg(spec, maps, engine="interp", budget=b),
                      XdpProg(spec, maps, engine="jit", budget=b, facts=facts))
                     for b in range(1, 110)]
        for interp, jit in pairs:
            out = []
            for prog in (interp, jit):
                f = frames.copy()
                res = prog.run_batch(f, 256, len(pkt))
                e = res.fault(0)
                out.append((int(res.action[0]), f.tobytes(),
                            None if e is None else (type(e).__name__, e.pc)))
            assert out[0] == out[1], f"budget {interp.budget}"


def test_facts_name_one_map_only_when_it_is_one_known_map() -> None:
    """A map value seen through several maps, or through a map-in-map's inner template
    (at run time: whichever map the slot holds), names no map: the JIT keeps its check;
    mixed pointer kinds are kept as such."""
    from pyxdp.spec import MapSpec
    from pyxdp.uapi.bpf import BpfMapType as MT
    from pyxdp.verifier.facts import AccessFacts

    a = MapSpec("a", int(MT.BPF_MAP_TYPE_ARRAY), 4, 8, 1)
    b = MapSpec("b", int(MT.BPF_MAP_TYPE_ARRAY), 4, 16, 1)
    inner = MapSpec("inner", int(MT.BPF_MAP_TYPE_ARRAY), 4, 8, 1)
    outer = MapSpec("outer", int(MT.BPF_MAP_TYPE_ARRAY_OF_MAPS), 4, 4, 1, inner=inner)
    facts = AccessFacts({"a": a, "b": b, "inner": inner, "outer": outer})
    facts.note(1, "map_value", a)
    facts.note(1, "map_value", a)
    facts.note(2, "map_value", a)
    facts.note(2, "map_value", b)
    facts.note(3, "map_value", inner)
    facts.note(4, "pkt", None)
    facts.note(4, "map_value", b)
    got = facts.result()
    assert (got[1].kinds, got[1].map_name, got[1].value_size) == ({"map_value"}, "a", 8)
    assert got[2].map_name is None and got[3].map_name is None
    assert got[4].kinds == {"pkt", "map_value"} and got[4].map_name == "b"
    assert not got[4].only("pkt") and got[1].only("map_value")
