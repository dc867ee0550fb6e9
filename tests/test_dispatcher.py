"""libxdp's dispatcher on pyxdp: XDP_RUN_CONFIG order, chain-call actions, the
single-program and frags rules, and several programs on one pyxdp interface.

``samples/chain.o``'s program k returns payload byte k (see chain.c), so each
packet below spells the verdicts; the same packets against Linux are in
tests/kernel/test_dispatcher_kernel.py."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.dispatcher import (
    MAX_DISPATCHER_ACTIONS,
    ChainEntry,
    DispatcherError,
    build_dispatcher,
    chain_order,
)
from pyxdp.errors import KernelError
from pyxdp.net.netdevice import Host
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import XdpProg, xdp_dispatcher
from pyxdp.spec import BPF_F_XDP_HAS_FRAGS, XdpRunConfig

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
CHAIN = SAMPLES / "chain.o"
ORDER = ["chain_first", "chain_b", "chain_mod", "chain_frags", "chain_last"]
PASS, DROP, TX = 2, 1, 3


@pytest.fixture(scope="module")
def chain() -> Iterator[Collection]:
    with Collection.load(CHAIN, engine="interp") as coll:
        yield coll


def _disp(coll: Collection, names: list[str]) -> XdpProg:
    prog = xdp_dispatcher([(coll.programs[n].handle, coll.programs[n].run_config)
                           for n in names])  # type: ignore[misc]
    return coll.backend.register(prog)  # type: ignore[attr-defined, no-any-return]


def _run(coll: Collection, prog: XdpProg, payload: bytes) -> tuple[int, int, list[int]]:
    before = [coll.maps["hits"][k] for k in range(5)]
    r = coll.backend.test_run(prog, udp_packet(payload))
    assert r.fault is None
    hits = [coll.maps["hits"][k] - before[k] for k in range(5)]
    return r.retval, len(r.data_out), hits


def test_run_configs_order_the_chain(chain: Collection) -> None:
    assert chain.programs["chain_last"].run_config is None  # no XDP_RUN_CONFIG: defaults
    d = _disp(chain, list(reversed(ORDER)))
    # priority first (10, 20, 20, 30, 50), then the name (chain_b before chain_mod)
    assert [p.spec.name for p, _ in d.chain] == ORDER
    assert [rc.priority for _, rc in d.chain] == [10, 20, 20, 30, 50]


def test_equal_priority_and_name_fall_back_to_size_then_load_order() -> None:
    rc = XdpRunConfig(priority=5)
    items = [("late-big", ChainEntry("p", rc, False, 9)),
             ("small", ChainEntry("p", rc, False, 3)),
             ("late-big2", ChainEntry("p", rc, False, 9)),
             ("first", ChainEntry("a", rc, False, 50))]
    assert [k for k, _ in chain_order(items, lambda i: i[1])] == \
        ["first", "small", "late-big", "late-big2"]


def test_chain_call_actions_decide_where_the_chain_stops(chain: Collection) -> None:
    d = _disp(chain, ORDER)
    # Every program passes: the dispatcher's own verdict is XDP_PASS.
    assert _run(chain, d, bytes([PASS] * 5)) == (PASS, 47, [1, 1, 1, 1, 1])
    # chain_first chains on DROP; chain_mod stops on TX (it chains on PASS only).
    assert _run(chain, d, bytes([DROP, PASS, TX])) == (TX, 45, [1, 1, 1, 0, 0])
    # chain_b chains on TX; chain_frags on every action, chain_last stops on DROP.
    assert _run(chain, d, bytes([PASS, TX, PASS, 0, DROP])) == (DROP, 47, [1, 1, 1, 1, 1])
    # A verdict that is no action: 1U << 33 is 1 << 1 (the shift is masked to 5 bits),
    # not a bit chain_b chains on, so 33 is the verdict.
    assert _run(chain, d, bytes([PASS, 33, PASS])) == (33, 45, [1, 1, 0, 0, 0])
    # ... while 34 reads as XDP_PASS's bit: the chain goes on.
    assert _run(chain, d, bytes([PASS, 34, PASS, PASS, PASS])) == (PASS, 47, [1] * 5)
    # Later programs see what earlier ones wrote: chain_b shrinks the frame by one byte,
    # chain_mod increments payload byte 8.
    payload = bytes([PASS] * 5 + [0, 0, 0, 7, 0xAA])
    r = chain.backend.test_run(d, udp_packet(payload))
    assert (r.retval, len(r.data_out), r.data_out[42 + 8]) == (PASS, 51, 8)


def test_one_program_replaces_the_dispatcher(chain: Collection) -> None:
    # libxdp puts a lone program in place of xdp_dispatcher: its verdict stands even
    # where its chain-call actions would go on (chain_first chains on DROP).
    d = _disp(chain, ["chain_first"])
    assert _run(chain, d, bytes([DROP])) == (DROP, 43, [1, 0, 0, 0, 0])
    d2 = _disp(chain, ["chain_first", "chain_last"])
    assert _run(chain, d2, bytes([DROP])) == (PASS, 43, [1, 0, 0, 0, 1])


def test_dispatcher_is_frags_aware_only_if_every_program_is(chain: Collection) -> None:
    assert _disp(chain, ["chain_frags", "chain_last"]).spec.flags & BPF_F_XDP_HAS_FRAGS
    assert not _disp(chain, ["chain_frags", "chain_b"]).spec.flags & BPF_F_XDP_HAS_FRAGS


def test_at_most_ten_programs() -> None:
    e = ChainEntry("p", XdpRunConfig(), False, 1)
    assert len(build_dispatcher([e] * MAX_DISPATCHER_ACTIONS).slot_pcs) == 10
    with pytest.raises(DispatcherError, match="1 to 10 programs, not 11"):
        build_dispatcher([e] * 11)


def test_jit_runs_the_linked_chain_as_the_interpreter(chain: Collection) -> None:
    with Collection.load(CHAIN, engine="jit") as jc:
        d = _disp(jc, ORDER)
        assert d.engine == "jit"
        for payload in (bytes([DROP, PASS, TX]), bytes([PASS, 33, PASS]),
                        bytes([PASS] * 5 + [0, 0, 0, 7, 0xAA])):
            assert _run(jc, d, payload) == _run(chain, _disp(chain, ORDER), payload)


def test_several_programs_on_one_pyxdp_interface() -> None:
    with Host(engine="interp") as host:
        eth0 = host.add_device("eth0")
        a, b = host.load(CHAIN), host.load(SAMPLES / "xdp1.o")
        disp = eth0.attach_xdp_multi([b.programs["xdp_prog1"], a.programs["chain_b"]])
        q = eth0.xdp_query()
        assert (q["prog"], q["prog_id"]) == ("xdp_dispatcher", disp.id)
        assert [(c["prog"], c["priority"]) for c in q["chain"]] == \
            [("chain_b", 20), ("xdp_prog1", 50)]
        # chain_b passes (payload byte 1) to xdp_prog1, which counts UDP and drops, or
        # drops itself (no chain on DROP), or stops on 33 (no action: XDP_ABORTED).
        eth0.receive([udp_packet(bytes([0, PASS]))] * 3 + [udp_packet(bytes([0, DROP]))] * 2
                     + [udp_packet(bytes([0, 33]))])
        host.run()
        assert a.maps["hits"][1] == 6 and b.maps["rxcnt"].sum(17) == 3
        assert (eth0.stats.xdp_drops, eth0.stats.xdp_aborted) == (5, 1)
        # Loading again adds to the chain (xdp-loader on an interface with a dispatcher).
        eth0.attach_xdp_multi([a.programs["chain_first"]])
        assert [c["prog"] for c in eth0.xdp_query()["chain"]] == \
            ["chain_first", "chain_b", "xdp_prog1"]
        eth0.detach_xdp_multi(b.programs["xdp_prog1"])
        assert [c["prog"] for c in eth0.xdp_query()["chain"]] == ["chain_first", "chain_b"]
        eth0.detach_xdp_multi(a.programs["chain_first"])
        eth0.detach_xdp_multi(a.programs["chain_b"])
        assert eth0.xdp_query()["mode"] == "none"
        # A plain program is not a dispatcher to add to.
        eth0.attach_xdp(b.programs["xdp_prog1"])
        with pytest.raises(KernelError) as ei:
            eth0.attach_xdp_multi([a.programs["chain_b"]])
        assert ei.value.errno == errno.EBUSY
