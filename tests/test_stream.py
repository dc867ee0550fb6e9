"""BPF streams (pyxdp/vm/stream.py) on both engines: samples/stream.o prints into its
stdout and stderr (bpf_stream_vprintk_impl) and Program.stream_read reads them back, in
pieces; the refusals (-ENOENT, -EINVAL, -ENOMEM, -ENOSPC), a 1024-byte message's NUL, and
the stream as BpfStream keeps it. tests/kernel/test_stream_kernel.py holds them to Linux."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from pyxdp.asm.assembler import assemble
from pyxdp.collection import Collection
from pyxdp.errors import HelperFault, KernelError
from pyxdp.net.packets import udp_packet
from pyxdp.net.prog import jit_available
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.stream import BPF_STREAM_MAX_CAPACITY, STREAM_KFUNCS, BpfStream

STREAM = Path(__file__).resolve().parents[1] / "samples" / "stream.o"
OUT = b"hello -42 7 from pyxdp at 192.0.2.7\n"
ERR = b"x|   12|-3   |00042|deadbeefcafe|\n" + b" " * 1021 + b"12\0"
RCS = {0: 0, 1: 0, 2: -errno.ENOENT, 3: -errno.EINVAL, 4: -errno.EINVAL, 5: -errno.ENOMEM,
       6: 0, 7: 0, 8: 0, 9: 0}


def _engines() -> list[str]:
    return ["interp", "jit"] if jit_available() else ["interp"]


@pytest.mark.parametrize("engine", _engines())
def test_stream_sample(engine: str) -> None:
    with Collection.load(STREAM, engine=engine) as coll:
        prog = coll.programs["xdp_stream"]
        assert prog.test_run(udp_packet(b"s")).fault is None
        assert dict(coll.maps["rcs"].items()) == RCS
        # a read stops where the reader's buffer ends, inside a message too
        assert prog.stream_read(1, 10) + prog.stream_read(1) == OUT
        assert prog.stream_read(1) == b""
        assert prog.stream_read(2, 0) == b""
        assert prog.stream_read(2) == ERR  # the 1024-byte message ends with its NUL
        with pytest.raises(KernelError, match="ENOENT"):
            prog.stream_read(3)
        flood = coll.programs["xdp_flood"]
        flood.test_run(udp_packet(b"s"), repeat=101)
        # 1000 bytes a message: the 100th would fill the stream to its capacity
        assert dict(coll.maps["rcs"].items())[8] == 99
        assert dict(coll.maps["rcs"].items())[9] == -errno.ENOSPC
        assert len(flood.stream_read(1, 1 << 20)) == 99_000
        flood.test_run(udp_packet(b"s"))  # read, the room is free again
        assert dict(coll.maps["rcs"].items())[8] == 100


def test_bpf_stream_capacity() -> None:
    s = BpfStream()
    assert s.push(b"a" * (BPF_STREAM_MAX_CAPACITY - 1)) == 0
    assert s.push(b"x") == -errno.ENOSPC  # the stream may never reach its capacity
    assert s.push(b"") == 0
    assert s.read(BPF_STREAM_MAX_CAPACITY) == b"a" * (BPF_STREAM_MAX_CAPACITY - 1)
    s.capacity = BPF_STREAM_MAX_CAPACITY  # at capacity: not even an empty message
    assert s.push(b"") == -errno.ENOSPC
    s.capacity = 0
    assert s.push(b"b" * BPF_STREAM_MAX_CAPACITY) == -errno.ENOSPC
    assert s.push(b"") == 0 and s.read(10) == b""


def test_stream_kfunc_needs_a_program() -> None:
    vm = Interpreter(assemble("r0 = 0\nexit"))
    with pytest.raises(HelperFault, match="runs no loaded program"):
        STREAM_KFUNCS["bpf_stream_vprintk_impl"](vm, 1, 0, 0, 0, 0)


def test_stream_read_bad_arguments() -> None:
    with Collection.load(STREAM, engine="interp") as coll:
        prog = coll.programs["xdp_stream"]
        for stream, size in (("1", 1), (1, -1), (True, 1)):
            with pytest.raises(TypeError, match="stream_read"):
                prog.stream_read(stream, size)  # type: ignore[arg-type]


def test_prog_run_prints_the_streams(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from pyxdp.cli.main import main
    monkeypatch.setattr("pyxdp.net.prog.jit_available", lambda: False)  # the interpreter
    pkt = tmp_path / "pkt"
    pkt.write_bytes(udp_packet(b"s"))
    assert main(["prog", "run", str(STREAM), "-s", "xdp_stream", "--data-in", str(pkt)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "stdout: hello -42 7 from pyxdp at 192.0.2.7" in out
    assert "stderr: x|   12|-3   |00042|deadbeefcafe|" in out
    assert main(["--json", "prog", "run", str(STREAM), "-s", "xdp_stream", "--data-in",
                 str(pkt)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stdout"] == OUT.decode() and doc["stderr"] == ERR.decode("latin-1")
