"""SEC("syscall") programs on pyxdp's engines against Linux: tests/verifier_objects/
syscall_prog.o's programs run through Program.test_run (ctx_in alone, written back as
ctx_out) on the kernel and on the userspace backend's interpreter and JIT; return
values, contexts, BPF_PROG_TEST_RUN's refusals and the maps they leave (read back by
the object's XDP program) must agree."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from pyxdp.collection import Collection
from pyxdp.errors import KernelError, NotSupportedError
from pyxdp.net.prog import jit_available

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[1] / "verifier_objects" / "syscall_prog.o"
# struct args: key, loops, value, old, sum, found, pad, name[16]
ARGS = struct.Struct("<IIQQQiI16s")
ENGINES = [("kernel", None), ("userspace", "interp")] + \
    ([("userspace", "jit")] if jit_available() else [])


def _args(key: int, value: int, loops: int = 0, name: bytes = b"") -> bytes:
    return ARGS.pack(key, loops, value, 0xAAAA, 0xBBBB, -1, 0, name.ljust(16, b"\0"))


def _outcome(run: Any) -> object:
    """A test_run's result (retval, ctx_out) or the refusal's type and errno."""
    try:
        r = run()
    except KernelError as e:
        return ("KernelError", e.errno)
    except NotSupportedError as e:
        return ("NotSupportedError", str(e))
    assert r.fault is None
    return (r.retval, r.ctx_out)


def _session(backend: str, engine: str | None) -> list[object]:
    kw = {"engine": engine} if engine else {}
    seen: list[object] = []
    with Collection.load(OBJ, backend, **kw) as coll:
        store, null, wide = coll["sys_store"], coll["sys_null"], coll["sys_wide"]
        for args in (_args(1, 0x1122334455667788, 5, b"abcdefghijklmnop"), _args(2, 9),
                     _args(1, 0xFFFF_FFFF_0000_0001, 100, b"xy"), _args(0xFFFF_FFFF, 1, 0),
                     _args(2, 0, 1), _args(3, 1 << 63, 1000)):
            seen.append(_outcome(lambda a=args: store.test_run(b"", ctx_in=a)))
        # a context shorter than the furthest access, or over U16_MAX bytes: EINVAL
        seen.append(_outcome(lambda: store.test_run(b"", ctx_in=_args(1, 1)[:-1])))
        seen.append(_outcome(lambda: store.test_run(b"", ctx_in=bytes(0x10000))))
        seen.append(_outcome(lambda: store.test_run(b"", ctx_in=_args(4, 4) + bytes(8))))
        seen.append(_outcome(lambda: store.test_run(b"", ctx_in=None)))
        seen.append(_outcome(lambda: store.test_run(b"\0" * 14, ctx_in=_args(1, 1))))
        seen.append(_outcome(lambda: null.test_run(b"", ctx_in=None)))
        seen.append(_outcome(lambda: null.test_run(b"", ctx_in=b"\5")))
        seen.append(_outcome(lambda: null.test_run(b"", ctx_in=bytes(0xFFFF))))
        big = bytearray(4104)
        big[4088:4096] = (0x0123_4567_89AB_CDEF).to_bytes(8, "little")
        seen.append(_outcome(lambda: wide.test_run(b"", ctx_in=bytes(big))))
        seen.append(_outcome(lambda: wide.test_run(b"", ctx_in=bytes(big[:-1]))))
        seen.append(sorted(coll.maps["kv"].items()))
        seen.append(coll.maps["runs"].lookup(0))
        xdp = coll["xdp_get"]
        for key in (1, 2, 3, 4, 5, 0xFFFF_FFFF):  # 5: no such key, XDP_DROP
            pkt = struct.pack("<I", key) + bytes(range(10, 60))
            r = xdp.test_run(pkt)
            seen.append((int(r.retval), r.data_out))
    return seen


def test_syscall_programs_run_as_on_linux() -> None:
    linux, *others = [_session(b, e) for b, e in ENGINES]
    for (backend, engine), got in zip(ENGINES[1:], others, strict=True):
        assert got == linux, f"{backend}/{engine}"
    # the runs did what the program says: 64-bit sums cut to retval's 32 bits, names
    # reversed, loops summed, the context past the struct written back as it was
    first = linux[0]
    assert first[0] == (0x1122334455667788 + 1) & 0xFFFF_FFFF  # type: ignore[index]
    key, loops, value, old, total, found, _, name = ARGS.unpack(first[1])  # type: ignore[index]
    assert (found, old, total, name) == (0, 0, 5 + 3 * 10, b"ponmlkjihgfedcba")
    assert linux[6] == linux[7] == ("KernelError", 22)
    assert linux[9][0] == "KernelError" and linux[10][0] == "NotSupportedError"  # type: ignore[index]
    assert [x[0] for x in linux[11:14]] == [7, 8, 8]  # type: ignore[index]
