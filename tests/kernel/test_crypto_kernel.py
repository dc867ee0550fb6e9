"""BPF crypto contexts against Linux: tests/verifier_objects/crypto.o's SEC("syscall")
program creates a context (bpf_crypto_ctx_create, kept in a map value's __kptr field)
and its XDP program en- or decrypts packet bytes with it (bpf_crypto_encrypt/_decrypt
over packet and map-value dynptrs). The same programs run on Linux and on pyxdp's
interpreter and JIT: the error codes, bytes and IVs must agree, and agree with
pyxdp.vm.bpf_crypto given the same params and buffers. The syscall program runs through
Program.test_run (ctx_in, written back as ctx_out)."""

from __future__ import annotations

import errno
import struct
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pyxdp.collection import Collection, Program
from pyxdp.elf import load_collection_spec
from pyxdp.errors import KernelError, NotSupportedError
from pyxdp.vm.bpf_crypto import (
    PARAMS,
    CryptoCtx,
    crypto_crypt,
    crypto_ctx_create,
    live_contexts,
)

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[1] / "verifier_objects" / "crypto.o"
KEY = bytes(range(0x40, 0x60))
# struct job: op, off, len, to, use_siv, siv_len, ret, dst_off; siv[32]; out[256]
JOB = struct.Struct("<IIIIIIiI32s256s")
PKT = bytes((i * 7 + 3) & 0xFF for i in range(80))


ENGINES = ("interp", "jit")


def _load(backend: str = "kernel", engine: str = "interp") -> Collection:
    """crypto.o's working programs on Linux or pyxdp (the others are mistakes Linux
    refuses, tests/test_verifier.py)."""
    spec = load_collection_spec(OBJ)
    progs = {n: spec.programs[n] for n in ("crypto_setup", "xdp_crypt", "sys_crypto_acquire")}
    if backend == "kernel":
        return Collection(replace(spec, programs=progs), "kernel")
    return Collection(replace(spec, programs=progs), backend, engine=engine)


def _kernel() -> Collection:
    return _load()


def _params(typ: bytes = b"skcipher", algo: bytes = b"ecb(aes)", key: bytes = KEY[:16],
            key_len: int | None = None, authsize: int = 0,
            reserved: bytes = b"\0\0") -> bytes:
    return PARAMS.pack(typ, reserved, algo, key, len(key) if key_len is None else key_len,
                       authsize)


PARAMS_CASES = [
    _params(), _params(algo=b"cbc(aes)"), _params(key=KEY[:24]), _params(key=KEY[:32]),
    _params(algo=b"cbc(aes)", key=KEY[:32]), _params(algo=b"ecb(aes-generic)"),
    _params(key=KEY[:15]), _params(key=KEY[:17]), _params(key_len=0), _params(key_len=257),
    _params(key_len=256), _params(authsize=16), _params(authsize=4, key_len=0),
    _params(reserved=b"\0\1"), _params(typ=b"aead"), _params(typ=b"skcipherx"),
    _params(typ=b"skcipher\0junk"), _params(algo=b"ctr(aes)"), _params(algo=b"xts(aes)"),
    _params(algo=b"aes"), _params(algo=b"ecb(des)"), _params(algo=b"gcm(aes)"),
    _params(algo=b"ECB(aes)"), _params(algo=b""), _params(algo=b"nope", authsize=4),
]


def _setup(prog: Program, params: bytes) -> tuple[int, int]:
    r = prog.test_run(b"", ctx_in=params + bytes(4))
    assert r.ctx_out is not None and r.ctx_out[:PARAMS.size] == params
    return r.retval, struct.unpack_from("<i", r.ctx_out, PARAMS.size)[0]


def test_ctx_create_errors_match_linux() -> None:
    with _kernel() as kern:
        setup = kern["crypto_setup"]
        got = [_setup(setup, p) for p in PARAMS_CASES]
        for engine in ENGINES:
            with _load("userspace", engine) as ours:
                assert [_setup(ours["crypto_setup"], p) for p in PARAMS_CASES] == got, engine
        for p, (ok, err) in zip(PARAMS_CASES, got, strict=True):
            ctx, want = crypto_ctx_create(p, PARAMS.size)
            assert (ok, err) == (int(ctx is not None), want), p[:32]
        # the size argument: bpf_crypto_ctx_create wants exactly sizeof(params)
        assert crypto_ctx_create(PARAMS_CASES[0], PARAMS.size - 4)[1] == -errno.EINVAL
        assert crypto_ctx_create(None, PARAMS.size)[1] == -errno.EINVAL
        with pytest.raises(NotSupportedError, match="runs once on ctx_in alone"):
            setup.test_run(b"x", ctx_in=PARAMS_CASES[0] + bytes(4))
    assert {e for _, e in got} == {0, -errno.EINVAL, -errno.ENOENT, -errno.EOPNOTSUPP}


@dataclass
class _Buf:
    """A dynptr over a bytearray window: read-write, one piece (what the test's
    packet, map-value and stack dynptrs are on Linux)."""

    mem: bytearray
    start: int
    size: int
    rdonly: bool = False

    def data(self, length: int, rw: bool) -> tuple[bytearray, int] | None:
        return self.mem, self.start


@dataclass(frozen=True)
class Job:
    op: int = 0
    off: int = 0
    length: int = 16
    to: int = 0  # 0: in place, 1: job.out, 2: the packet from dst_off on
    use_siv: int = 0
    siv: bytes = b""
    dst_off: int = 0

    def pack(self) -> bytes:
        return JOB.pack(self.op, self.off, self.length, self.to, self.use_siv,
                        len(self.siv), 0, self.dst_off, self.siv, b"")

    def model(self, ctx: CryptoCtx) -> tuple[int, bytes, bytes, bytes]:
        """What xdp_crypt does with the packet, through pyxdp.vm.bpf_crypto: ret, the
        packet after, job.siv and job.out after."""
        pkt, siv, out = bytearray(PKT), bytearray(self.siv.ljust(32, b"\0")), bytearray(256)
        end = self.off + self.length
        # bpf_dynptr_adjust refuses a window past the packet: src stays the whole packet
        src = _Buf(pkt, self.off, self.length) if end <= len(PKT) else _Buf(pkt, 0, len(PKT))
        dst = _Buf(out, 0, len(out)) if self.to == 1 else src
        if self.to == 2:
            dst = _Buf(pkt, self.dst_off, len(PKT) - self.dst_off)
        iv = _Buf(siv, 0, len(self.siv)) if self.use_siv else None
        ret = crypto_crypt(ctx, src, dst, iv, bool(self.op))
        return ret, bytes(pkt), bytes(siv), bytes(out)


def _jobs() -> Iterator[tuple[bytes, Job]]:
    iv = bytes(range(0x80, 0x90))
    for length in (16, 32, 48, 15, 17, 33, 0):
        for op in (0, 1):
            yield _params(), Job(op=op, off=4, length=length)
            yield _params(algo=b"cbc(aes)"), Job(op=op, off=4, length=length, use_siv=1,
                                                 siv=iv)
    ecb, cbc = _params(key=KEY[:32]), _params(algo=b"cbc(aes)", key=KEY[:24])
    yield ecb, Job(off=8, length=32, to=1)
    yield ecb, Job(off=70, length=16)  # past the packet: the whole packet, 80 bytes
    yield ecb, Job(use_siv=1, siv=b"")  # an IV of 0 bytes is ecb's
    yield ecb, Job(use_siv=1, siv=iv)  # ... 16 are not
    yield cbc, Job(off=0, length=64, use_siv=1, siv=iv, to=1)
    yield cbc, Job(op=1, off=16, length=48, use_siv=1, siv=iv, to=1)
    # source and destination overlapping in the packet: block by block, as Linux goes
    for op in (0, 1):
        for off, length, dst_off in ((0, 32, 16), (16, 32, 0), (4, 48, 20), (20, 48, 4),
                                     (0, 32, 8), (8, 40, 0), (0, 24, 4)):
            yield ecb, Job(op=op, off=off, length=length, to=2, dst_off=dst_off)
            yield cbc, Job(op=op, off=off, length=length, to=2, dst_off=dst_off, use_siv=1,
                           siv=iv)
    yield cbc, Job(off=0, length=16, to=2, dst_off=70, use_siv=1, siv=iv)  # dst too short
    yield cbc, Job()  # no IV
    yield cbc, Job(use_siv=1, siv=iv[:15])
    yield cbc, Job(use_siv=1, siv=iv + b"\0")


def _run_jobs(coll: Collection) -> list[tuple[int, int, bytes, bytes, bytes]]:
    """crypto_setup then xdp_crypt for each of _jobs(): the XDP return, job.ret, the
    packet after, job.siv and job.out."""
    setup, xdp, jobs = coll["crypto_setup"], coll["xdp_crypt"], coll.maps["jobs"]
    assert xdp.test_run(PKT).retval == 0  # XDP_ABORTED: no context yet
    out = []
    for params, job in _jobs():
        assert _setup(setup, params) == (1, 0)
        jobs.handle.update(bytes(4), job.pack())
        r = xdp.test_run(PKT)
        assert getattr(r, "fault", None) is None, (job, r)
        raw = jobs.handle.lookup(bytes(4))
        assert raw is not None
        after = JOB.unpack(raw)
        out.append((r.retval, after[6], r.data_out, after[8], after[9]))
    return out


def test_encrypt_decrypt_match_linux() -> None:
    with _kernel() as kern:
        linux = _run_jobs(kern)
    seen = set()
    for (params, job), got in zip(_jobs(), linux, strict=True):
        ctx, err = crypto_ctx_create(params, PARAMS.size)
        assert ctx is not None and err == 0
        ret, pkt, siv, out = job.model(ctx)
        assert got == (2, ret, pkt, siv, out), job
        seen.add((ret, pkt != PKT))
    # whole blocks, refused lengths with and without blocks written before the refusal
    assert {(0, True), (-errno.EINVAL, True), (-errno.EINVAL, False)} <= seen
    for engine in ENGINES:
        with _load("userspace", engine) as ours:
            assert _run_jobs(ours) == linux, engine


def test_ctx_references_and_max_ctx_offset() -> None:
    """sys_crypto_acquire takes a second reference and gives both back (1; no context
    left); it reaches its context only through bpf_crypto_ctx_create's params, so a
    context a byte short of them is EINVAL (max_ctx_offset). On pyxdp the context's
    destructor runs when the last reference goes: released, or the map value holding
    it overwritten."""
    ok = _params(algo=b"cbc(aes)")
    with _kernel() as kern:
        acq = kern["sys_crypto_acquire"]
        assert acq.test_run(b"", ctx_in=ok).retval == 1
        assert acq.test_run(b"", ctx_in=_params(key_len=0)).retval == 2**32 - errno.EINVAL
        with pytest.raises(KernelError) as e:
            acq.test_run(b"", ctx_in=ok[:-1])
        assert e.value.errno == errno.EINVAL
    for engine in ENGINES:
        with _load("userspace", engine) as ours:
            base = live_contexts()
            acq = ours["sys_crypto_acquire"]
            assert acq.test_run(b"", ctx_in=ok).retval == 1 and live_contexts() == base
            assert acq.test_run(b"", ctx_in=_params(key_len=0)).retval == 2**32 - errno.EINVAL
            with pytest.raises(KernelError) as e:
                acq.test_run(b"", ctx_in=ok[:-1])
            assert e.value.errno == errno.EINVAL
            setup = ours["crypto_setup"]
            assert _setup(setup, ok) == (1, 0) and live_contexts() == base + 1
            assert _setup(setup, ok) == (1, 0) and live_contexts() == base + 1  # old released
            ours.maps["ctxs"].handle.update(bytes(4), bytes(8))  # the kptr field cleared
            assert live_contexts() == base
