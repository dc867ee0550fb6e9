"""BPF streams against Linux: samples/stream.o run by BPF_PROG_TEST_RUN on Linux and on
pyxdp (interpreter), each kfunc call's return code and the streams read back
(BPF_PROG_STREAM_READ_BY_FD on Linux, Program.stream_read on pyxdp).

Linux allocates each message's room with alloc_pages_nolock, which fails on a kernel
still deferring its struct page initialisation (this machine's 6.18: every message
that passes the argument checks gets -ENOMEM). So: the argument checks' codes
(-ENOENT, -EINVAL, -ENOMEM past 1024 bytes) must be Linux's; a message Linux accepted
must be pyxdp's byte for byte; one it refused is -ENOMEM and absent from its stream.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import KernelError
from pyxdp.net.packets import udp_packet

pytestmark = pytest.mark.kernel

STREAM = Path(__file__).resolve().parents[2] / "samples" / "stream.o"
# rcs slots of xdp_stream's calls, and the stream each writes into when accepted
_CALLS = {0: 1, 1: 2, 2: 3, 3: 1, 4: 1, 5: 1, 6: 2, 7: 1}
_ARG_CHECKS = (2, 3, 4, 5)


def _run(backend: str) -> tuple[dict[Any, Any], dict[int, list[bytes]]]:
    """xdp_stream's codes, and per call that printed the stream's new bytes."""
    with Collection.load(STREAM, backend, engine="interp") as coll:
        prog = coll.programs["xdp_stream"]
        res = prog.test_run(udp_packet(b"s"))
        assert res.fault is None
        with pytest.raises(KernelError, match="ENOENT"):
            prog.stream_read(3)
        streams = {s: [prog.stream_read(s)] for s in (1, 2)}
        assert prog.stream_read(1, 0x7FFF_FFFF) == b""  # read: nothing is left, at any size
        return dict(coll.maps["rcs"].items()), streams


# Each accepted call's message on pyxdp (tests/test_stream.py holds the bytes)
_OUT = b"hello -42 7 from pyxdp at 192.0.2.7\n"
_ERR = b"x|   12|-3   |00042|deadbeefcafe|\n"
_FULL = b" " * 1021 + b"12\0"  # a 1024-byte output: 1023 bytes and its NUL
_MESSAGES = {0: _OUT, 1: _ERR, 6: _FULL, 7: b""}


def test_stream_matches_linux() -> None:
    linux_rcs, linux_streams = _run("kernel")
    rcs, streams = _run("userspace")
    for slot in _ARG_CHECKS:
        assert linux_rcs[slot] == rcs[slot], slot
    assert rcs[5] == -errno.ENOMEM
    assert all(rcs[s] == 0 for s in _MESSAGES)
    assert streams == {1: [_OUT], 2: [_ERR + _FULL]}
    # Linux's streams hold pyxdp's messages, less those it could not allocate room for.
    refused = {s for s in _MESSAGES if linux_rcs[s]}
    assert all(linux_rcs[s] == -errno.ENOMEM for s in refused), linux_rcs
    want: dict[int, list[bytes]] = {1: [b""], 2: [b""]}
    for slot, msg in sorted(_MESSAGES.items()):
        if slot not in refused:
            want[_CALLS[slot]][0] += msg
    assert linux_streams == want
