"""Hostile objects and bytecode on both engines, each batch in a subprocess so that a
crash fails the test instead of killing pytest: mutated sample objects that still parse
are loaded and test-run (tests/test_elf_fuzz.py covers parsing alone), adversarial
random programs with XDP helpers run on the interpreter and the JIT. Seeded and bounded
in time; every outcome is a result or a pyxdp error, and no descriptor is left open.
Then load/close cycles on both backends and maps updated from threads while the
datapath runs.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
SEED = 0x14
SECONDS = 3.0  # per batch, in the worker


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _packets(rng: random.Random) -> list[bytes]:
    from pyxdp.net.packets import udp_packet
    good = udp_packet(b"x" * 20)
    return [good, good[:14], bytes(rng.randrange(256) for _ in range(rng.randrange(14, 90)))]


def _run_all(coll: Any, packets: list[bytes], out: dict[str, Any]) -> None:
    from pyxdp.errors import PyxdpError
    for prog in coll.programs.values():
        for pkt in packets:
            try:
                r = prog.test_run(pkt)
                out["faults" if r.fault else "results"] += 1
            except PyxdpError as e:
                out["typed"][type(e).__name__] = out["typed"].get(type(e).__name__, 0) + 1


def _until(out: dict[str, Any], seconds: float) -> Callable[[], bool]:
    """A batch's clock, started once its imports are done: ``seconds`` of work, longer
    (up to 20 times) until something loaded, so a slow first load on a busy machine
    still leaves a batch that tested something."""
    start = time.monotonic()

    def more() -> bool:
        spent = time.monotonic() - start
        return spent < seconds or (not out["loaded"] and spent < 20 * seconds)
    return more


def _mutated_objects(out: dict[str, Any], rng: random.Random, seconds: float) -> None:
    from pyxdp.collection import Collection
    from pyxdp.elf import load_collection_spec
    from pyxdp.errors import PyxdpError
    from pyxdp.userspace import UserspaceBackend
    from pyxdp.vm.jit.engine import compile_together
    objs = [(SAMPLES / n).read_bytes() for n in ("xdp1.o", "xdp2.o", "adjust_tail.o",
                                                  "meta.o")]
    more = _until(out, seconds)
    while more():
        buf = bytearray(rng.choice(objs))
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(64, len(buf))  # past the ELF header: code, BTF, relocations
            buf[pos] = rng.randrange(256)
        try:
            spec = load_collection_spec(bytes(buf))
            out["parsed"] += 1
            for engine in ("interp", "auto"):
                with compile_together(0):  # -O0: the machine code of the same program
                    coll = Collection(spec, UserspaceBackend(engine=engine))
                with coll:
                    out["loaded"] += 1
                    _run_all(coll, _packets(rng), out)
        except PyxdpError as e:
            out["typed"][type(e).__name__] = out["typed"].get(type(e).__name__, 0) + 1


def _random_program(rng: random.Random) -> tuple[Any, ...]:
    from pyxdp.asm import opcodes as op
    from pyxdp.asm.insn import Instruction, decode, ld_imm64
    from pyxdp.net.filter import XDP_HELPERS
    helpers = sorted(XDP_HELPERS)
    if rng.random() < 0.2:  # raw slots
        return decode(bytes(rng.randrange(256) for _ in range(8 * rng.randint(1, 12))))
    wild = [0, 1, 14, 64, 255, 4096, -1, -8, -512, -(1 << 31), (1 << 31) - 1]
    prog: list[Instruction] = [
        Instruction(op.BPF_LDX | op.BPF_MEM | op.BPF_W, 2, 1, 0, 0),   # r2 = ctx->data
        Instruction(op.BPF_LDX | op.BPF_MEM | op.BPF_W, 3, 1, 4, 0)]   # r3 = ctx->data_end
    for _ in range(rng.randint(1, 24)):
        k = rng.random()
        d, s = rng.randrange(10), rng.randrange(11)
        if k < 0.3:
            prog.append(Instruction(op.BPF_ALU64 | rng.choice(
                [op.BPF_ADD, op.BPF_SUB, op.BPF_MOV, op.BPF_AND, op.BPF_LSH]) | op.BPF_K,
                d, 0, 0, rng.choice(wild)))
        elif k < 0.45:
            prog.append(Instruction(op.BPF_ALU64 | op.BPF_ADD | op.BPF_X, d, s, 0, 0))
        elif k < 0.6:
            prog.append(Instruction(op.BPF_LDX | op.BPF_MEM | rng.choice(
                [op.BPF_B, op.BPF_H, op.BPF_W, op.BPF_DW]), d, s, rng.choice(wild) & 0x7FFF, 0))
        elif k < 0.7:
            prog.append(Instruction(op.BPF_STX | op.BPF_MEM | op.BPF_DW, rng.choice([2, 10, s]),
                                    d, rng.choice([0, -8, -512, 8, 60]), 0))
        elif k < 0.85:
            for r in range(1, 6):
                if rng.random() < 0.5:
                    prog.extend(ld_imm64(r, rng.choice(wild + [1 << 63, 1 << 44])
                                         & ((1 << 64) - 1)))
            prog.append(Instruction(op.BPF_JMP | op.BPF_CALL, 0, 0, 0, rng.choice(helpers)))
        elif k < 0.95:
            prog.append(Instruction(op.BPF_JMP | op.BPF_JGT | op.BPF_X, d, s,
                                    rng.randint(-4, 3), 0))
        else:
            prog.append(Instruction(op.BPF_JMP | op.BPF_JA, 0, 0, -len(prog) - 1, 0))  # a loop
    prog += [Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 0, 0, 0, rng.randrange(6)),
             Instruction(op.BPF_JMP | op.BPF_EXIT, 0, 0, 0, 0)]
    return tuple(prog)


def _random_bytecode(out: dict[str, Any], rng: random.Random, seconds: float) -> None:
    from pyxdp.collection import Collection
    from pyxdp.errors import PyxdpError
    from pyxdp.spec import CollectionSpec, ProgramSpec
    from pyxdp.userspace import UserspaceBackend
    from pyxdp.vm.jit.engine import compile_together
    more = _until(out, seconds)
    while more():
        batch = [_random_program(rng) for _ in range(20)]
        for engine in ("interp", "auto"):
            colls = []
            with compile_together(0):
                for insns in batch:
                    spec = CollectionSpec({"t": ProgramSpec("t", "xdp", insns, license="GPL")},
                                          {}, license="GPL")
                    try:
                        colls.append(Collection(spec, UserspaceBackend(engine=engine)))
                        out["loaded"] += 1
                    except PyxdpError as e:
                        out["typed"][type(e).__name__] = out["typed"].get(type(e).__name__,
                                                                          0) + 1
            for coll in colls:
                with coll:
                    _run_all(coll, _packets(rng), out)


def _worker(kind: str, seed: int) -> None:
    rng = random.Random(seed)
    out: dict[str, Any] = {"parsed": 0, "loaded": 0, "results": 0, "faults": 0, "typed": {},
                           "untyped": []}
    fds = _fds()
    try:
        (_mutated_objects if kind == "objects" else _random_bytecode)(out, rng, SECONDS)
    except Exception as e:  # noqa: BLE001 - what the test is looking for
        out["untyped"].append(repr(e))
    out["fd_growth"] = _fds() - fds
    print(json.dumps(out))


@pytest.mark.parametrize("kind", ["objects", "bytecode"])
def test_hostile_input_in_a_subprocess(kind: str) -> None:
    res = subprocess.run([sys.executable, __file__, kind, str(SEED)], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, f"the worker died ({res.returncode}): {res.stderr[-2000:]}"
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["untyped"] == [], out
    assert out["fd_growth"] == 0, out
    assert out["loaded"] > 0 and out["results"] + out["faults"] > 0, out


def test_load_close_cycles_leave_no_descriptor() -> None:
    from pyxdp.collection import Collection
    from pyxdp.elf import load_collection_spec
    from pyxdp.kernel import bpf_available
    from pyxdp.userspace import UserspaceBackend
    spec = load_collection_spec(SAMPLES / "lb.o")
    # The interpreter: machine code holds no descriptor and would only add compile time.
    backends: list[Any] = [lambda: UserspaceBackend(engine="interp")]
    if bpf_available()[0]:
        backends.append(lambda: "kernel")
    for backend in backends:
        Collection(spec, backend()).close()  # lazy imports done
        fds = _fds()
        for _ in range(45):
            with Collection(spec, backend()) as coll:
                coll.maps["backends"][0] = {"addr": bytes([10, 1, 0, 1])}
                coll.programs["lb_ingress"].test_run(bytes(64))
        assert _fds() == fds, backend()


def test_threads_update_maps_while_the_datapath_runs() -> None:
    from pyxdp.net.netdevice import Host
    from pyxdp.net.source import TrafficGenerator
    with Host() as host:
        eth0 = host.add_device("eth0")
        xdp1 = host.load(SAMPLES / "xdp1.o")
        eth0.attach_xdp(xdp1.programs["xdp_prog1"])
        eth0.rx[0].source = TrafficGenerator(flows=8, count=20_000)
        rxcnt = xdp1.maps["rxcnt"]
        stop = threading.Event()
        errors: list[BaseException] = []

        def writer(seed: int) -> None:
            rng = random.Random(seed)
            try:
                while not stop.is_set():
                    key = rng.randrange(256)
                    rxcnt[key] = [0] * rxcnt.nr_cpus
                    rxcnt.lookup(rng.randrange(256))
                    list(rxcnt.handle.lookup_batch(None, 16))
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(SEED + n,)) for n in range(2)]
        for t in threads:
            t.start()
        try:
            host.run()
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        assert errors == []
        assert eth0.stats.rx_packets == 20_000 == eth0.stats.xdp_drops
    # leaving the block checked the pages


def test_an_iterator_next_on_the_frame_pointer_is_refused() -> None:
    # Found by fuzzing: at an iterator _next call (a pruning point) the verifier looked
    # up the iterator R1 points to; R1 = R10 made a negative stack slot (IndexError).
    from pyxdp.asm import opcodes as op
    from pyxdp.asm.insn import Instruction
    from pyxdp.collection import Collection
    from pyxdp.errors import VerifierError
    from pyxdp.spec import CollectionSpec, KfuncRef, ProgramSpec
    from pyxdp.userspace import UserspaceBackend
    for off in (0, 8, 16):
        insns = (Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_X, 1, 10, 0, 0),
                 Instruction(op.BPF_ALU64 | op.BPF_ADD | op.BPF_K, 1, 0, 0, off),
                 Instruction(op.BPF_JMP | op.BPF_CALL, 0, 2, 0, 0),
                 Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 0, 0, 0, 2),
                 Instruction(op.BPF_JMP | op.BPF_EXIT, 0, 0, 0, 0))
        prog = ProgramSpec("t", "xdp", insns, license="GPL",
                           kfuncs=(KfuncRef(2, "bpf_iter_num_next"),))
        with pytest.raises(VerifierError, match="iter_num"):
            Collection(CollectionSpec({"t": prog}, {}, license="GPL"),
                       UserspaceBackend(engine="interp"))


def test_test_run_arguments_are_checked_as_the_kernel_holds_them() -> None:
    # Found by probing the API: an int was that many zero bytes, repeat=2**40 ran for
    # hours, a str ctx_in failed inside struct padding. Both backends share the check.
    from pyxdp.collection import Collection
    from pyxdp.errors import KernelError
    with Collection.load(SAMPLES / "xdp1.o", engine="interp") as coll:
        prog = coll.programs["xdp_prog1"]
        for bad in (64, "x" * 64, None):
            with pytest.raises(TypeError, match="data_in must be a bytes-like"):
                prog.test_run(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="ctx_in must be a bytes-like"):
            prog.test_run(bytes(64), ctx_in=24)  # type: ignore[arg-type]
        for kw in ({"repeat": 1 << 40}, {"repeat": -1}, {"data_size_out": -1},
                   {"ctx_size_out": 1 << 32}):
            with pytest.raises(KernelError, match=r"outside 0\.\.4294967295"):
                prog.test_run(bytes(64), **kw)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="repeat must be an int"):
            prog.test_run(bytes(64), repeat="2")  # type: ignore[arg-type]
        assert prog.test_run(bytearray(64)).retval == prog.test_run(bytes(64)).retval


if __name__ == "__main__":
    _worker(sys.argv[1], int(sys.argv[2]))


# r6 = bpf_xdp_adjust_tail(ctx, DELTA); return r6 * 65536 + bpf_xdp_get_buff_len(ctx)
_TAIL_THEN_LEN = """
r7 = r1
r2 = {delta}
call 65
r6 = r0
r6 <<= 16
r1 = r7
call 188
r0 += r6
exit
"""


def _tail_then_len(backend: str, engine: str, delta: int, data: bytes) -> int:
    import dataclasses

    from pyxdp.collection import Collection
    from pyxdp.spec import BPF_F_XDP_HAS_FRAGS
    from pyxdp.testing.programs import asm_collection
    spec = asm_collection(_TAIL_THEN_LEN.format(delta=delta))
    prog = dataclasses.replace(spec.programs["t"], flags=BPF_F_XDP_HAS_FRAGS)
    spec = dataclasses.replace(spec, programs={"t": prog})
    kw = {"engine": engine} if backend == "userspace" else {}
    with Collection(spec, backend, **kw) as c:
        res = c.programs["t"].test_run(data, data_size_out=len(data) + 64)
        return int(res.retval)


# Found by running random helper sequences on frags buffers against Linux: a shrink by
# INT_MIN. Linux negates the int offset (-INT_MIN wraps to INT_MIN), the negative cut
# passes bpf_xdp_frags_shrink_tail's length check and cuts nothing: 0, the packet
# whole; pyxdp said -EINVAL. INT_MIN + 1 is a real shrink past the packet: -EINVAL.
_INT_MIN_CASES = [(-(1 << 31), 5000, 5000), (-(1 << 31) + 1, 5000, (-22 << 16) + 5000),
                  (-100, 5000, 4900)]


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_a_frags_tail_shrink_by_int_min_cuts_nothing_as_on_linux(engine: str) -> None:
    from pyxdp.net.prog import jit_available
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    for delta, size, want in _INT_MIN_CASES:
        got = _tail_then_len("userspace", engine, delta, bytes(size))
        assert got == want & 0xFFFFFFFF, (delta, hex(got))


@pytest.mark.kernel
def test_linux_shrinks_a_frags_tail_by_int_min_by_nothing() -> None:
    for delta, size, want in _INT_MIN_CASES:
        assert _tail_then_len("kernel", "", delta, bytes(size)) == want & 0xFFFFFFFF, delta
