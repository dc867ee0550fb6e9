"""bpf(2) through pyxdp.kernel.syscall against the running kernel, and the uapi constants."""

from __future__ import annotations

import errno
import os
import struct
import subprocess
import sys

import pytest

from pyxdp.asm.insn import Instruction, ld_imm64
from pyxdp.errors import BPFUnavailable, InvalidProgram, KernelError, VerifierError
from pyxdp.kernel import (
    BpfMap,
    Fd,
    MapInfo,
    ProgInfo,
    TestRunOutputTruncated,
    TestRunResult,
    bpf_available,
    btf_load,
    map_create,
    map_delete_batch,
    map_delete_elem,
    map_freeze,
    map_get_fd_by_id,
    map_get_info,
    map_get_next_id,
    map_get_next_key,
    map_keys,
    map_lookup_and_delete_elem,
    map_lookup_batch,
    map_lookup_elem,
    map_update_batch,
    map_update_elem,
    obj_get_info_by_fd,
    possible_cpus,
    prog_get_fd_by_id,
    prog_get_info,
    prog_get_next_id,
    prog_load,
    prog_test_run,
    require_bpf,
    sys_bpf_number,
)
from pyxdp.kernel.verifier_log import last_insn_pc, verifier_reason
from pyxdp.uapi.bpf import (
    BpfAttachType,
    BpfCmd,
    BpfFuncId,
    BpfMapType,
    BpfProgType,
    MapFlag,
    MapUpdateFlag,
    ProgLoadFlag,
    TestRunFlag,
    XdpAction,
    XdpMd,
)

pytestmark = pytest.mark.kernel

_OK, _WHY = bpf_available()
if not _OK and not os.environ.get("CI"):
    pytest.skip(f"needs root and BPF: {_WHY}", allow_module_level=True)

ARRAY = BpfMapType.BPF_MAP_TYPE_ARRAY
HASH = BpfMapType.BPF_MAP_TYPE_HASH
XDP = BpfProgType.BPF_PROG_TYPE_XDP


def u32(n: int) -> bytes:
    return struct.pack("=I", n)


def u64(n: int) -> bytes:
    return struct.pack("=Q", n)


def exit_with(value: int) -> list[Instruction]:
    """r0 = value; exit."""
    return [Instruction(0xB7, 0, 0, 0, value), Instruction(0x95)]


# ---------------------------------------------------------------- uapi values

def test_uapi_values_match_the_kernel_header() -> None:
    expected: dict[int, int] = {
        BpfCmd.BPF_PROG_TEST_RUN: 10, BpfCmd.BPF_PROG_RUN: 10, BpfCmd.BPF_MAP_FREEZE: 22,
        BpfCmd.BPF_TOKEN_CREATE: 36, BpfMapType.BPF_MAP_TYPE_DEVMAP: 14,
        BpfMapType.BPF_MAP_TYPE_CPUMAP: 16, BpfMapType.BPF_MAP_TYPE_XSKMAP: 17,
        BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH: 25, BpfMapType.BPF_MAP_TYPE_RINGBUF: 27,
        BpfMapType.BPF_MAP_TYPE_ARENA: 33, BpfProgType.BPF_PROG_TYPE_XDP: 6,
        BpfProgType.BPF_PROG_TYPE_NETFILTER: 32, BpfAttachType.BPF_XDP: 37,
        BpfAttachType.BPF_XDP_DEVMAP: 33, BpfAttachType.BPF_XDP_CPUMAP: 35,
        MapUpdateFlag.BPF_F_LOCK: 4, MapFlag.BPF_F_MMAPABLE: 1 << 10,
        MapFlag.BPF_F_RDONLY_PROG: 1 << 7, ProgLoadFlag.BPF_F_XDP_HAS_FRAGS: 1 << 5,
        TestRunFlag.BPF_F_TEST_XDP_LIVE_FRAMES: 2,
    }
    for const, value in expected.items():
        assert int(const) == value, const
    assert [int(a) for a in XdpAction] == [0, 1, 2, 3, 4]
    assert [int(f) for f in XdpMd] == [0, 4, 8, 12, 16, 20]
    assert [f.name for f in XdpMd] == ["data", "data_end", "data_meta", "ingress_ifindex",
                                       "rx_queue_index", "egress_ifindex"]


def test_helper_ids_follow_the_func_mapper() -> None:
    ids = {f.name: f.value for f in BpfFuncId}
    assert len(BpfFuncId) == 212 and sorted(ids.values()) == list(range(212))
    assert ids["BPF_FUNC_unspec"] == 0
    assert ids["BPF_FUNC_map_lookup_elem"] == 1
    assert ids["BPF_FUNC_tail_call"] == 12
    assert ids["BPF_FUNC_redirect"] == 23
    assert ids["BPF_FUNC_xdp_adjust_head"] == 44
    assert ids["BPF_FUNC_redirect_map"] == 51
    assert ids["BPF_FUNC_xdp_adjust_meta"] == 54
    assert ids["BPF_FUNC_xdp_adjust_tail"] == 65
    assert ids["BPF_FUNC_fib_lookup"] == 69
    assert ids["BPF_FUNC_ringbuf_output"] == 130
    assert ids["BPF_FUNC_for_each_map_elem"] == 164
    assert ids["BPF_FUNC_loop"] == 181
    assert ids["BPF_FUNC_xdp_get_buff_len"] == 188
    assert ids["BPF_FUNC_user_ringbuf_drain"] == 209
    assert ids["BPF_FUNC_cgrp_storage_delete"] == 211
    assert BpfFuncId.BPF_FUNC_map_update_elem.helper_name == "bpf_map_update_elem"


def test_syscall_numbers() -> None:
    assert sys_bpf_number("x86_64") == 321
    assert sys_bpf_number("aarch64") == 280
    assert sys_bpf_number("pdp11") is None


# ---------------------------------------------------------------- availability, fds

_UNPRIVILEGED = """
from pyxdp.asm.insn import Instruction
from pyxdp.errors import BPFUnavailable
from pyxdp.kernel import bpf_available, prog_load
import os
os.setgid(65534)
os.setuid(65534)
ok, why = bpf_available()
print("probe", ok, why)
try:
    prog_load(6, [Instruction(0xB7, 0, 0, 0, 2), Instruction(0x95)])
except BPFUnavailable as e:
    print("load", type(e).__name__, e)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
def test_unprivileged_caller_gets_bpf_unavailable() -> None:
    # Imports happen before setuid: the interpreter's own files may be unreadable later.
    out = subprocess.run([sys.executable, "-c", _UNPRIVILEGED], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    probe = next(ln for ln in out.splitlines() if ln.startswith("probe"))
    # With kernel.unprivileged_bpf_disabled=0 an unprivileged array map is allowed.
    assert probe == "probe True bpf(2) available" or "not root" in probe
    assert "load BPFUnavailable BPF_PROG_LOAD failed: EPERM" in out and "not root" in out


def test_bpf_available_and_require() -> None:
    ok, why = bpf_available()
    assert ok, why
    assert why
    require_bpf()


def test_fd_closes_deterministically() -> None:
    fd = map_create(ARRAY, 4, 8, 1)
    raw = fd.fd
    assert fd.kind == "map" and not fd.closed and fd.fileno() == raw
    with fd:
        pass
    assert fd.closed and fd.fd == -1
    fd.close()  # idempotent
    with pytest.raises(ValueError):
        fd.fileno()
    with pytest.raises(OSError):
        os.fstat(raw)  # really closed (nothing else can have reused it yet)


def test_fd_detach_and_del() -> None:
    fd = map_create(ARRAY, 4, 8, 1)
    raw = fd.detach()
    assert fd.closed
    os.fstat(raw)
    os.close(raw)
    probe = os.dup(0)
    os.close(probe)
    fd2 = map_create(ARRAY, 4, 8, 1)
    raw2 = fd2.fd
    del fd2  # __del__ closes it
    again = os.dup(0)
    os.close(again)
    assert again == min(probe, raw2)


# ---------------------------------------------------------------- maps

def test_array_map_semantics() -> None:
    with map_create(ARRAY, 4, 8, 4, name="t_array") as m:
        assert map_lookup_elem(m, u32(1), 8) == bytes(8)  # array slots always exist
        map_update_elem(m, u32(1), b"12345678")
        assert map_lookup_elem(m, u32(1), 8) == b"12345678"
        assert map_lookup_elem(m, u32(9), 8) is None  # out of range: ENOENT
        with pytest.raises(KernelError) as e2big:
            map_update_elem(m, u32(9), bytes(8))
        assert e2big.value.errno == errno.E2BIG
        with pytest.raises(KernelError) as eexist:
            map_update_elem(m, u32(1), bytes(8), MapUpdateFlag.BPF_NOEXIST)
        assert eexist.value.errno == errno.EEXIST
        map_update_elem(m, u32(2), b"abcdefgh", MapUpdateFlag.BPF_EXIST)
        with pytest.raises(KernelError) as einval:
            map_delete_elem(m, u32(1))  # array elements cannot be deleted
        assert einval.value.errno == errno.EINVAL
        assert list(map_keys(m, 4)) == [u32(i) for i in range(4)]
        assert map_get_next_key(m, None, 4) == u32(0)
        assert map_get_next_key(m, u32(3), 4) is None
        assert map_get_next_key(m, u32(99), 4) == u32(0)  # unknown key restarts
        assert [k for k, _ in map_lookup_batch(m, 4, 8)] == [u32(i) for i in range(4)]


def test_hash_map_semantics() -> None:
    with map_create(HASH, 4, 8, 2) as m:
        assert map_lookup_elem(m, u32(7), 8) is None
        with pytest.raises(KernelError) as enoent:
            map_delete_elem(m, u32(7))
        assert enoent.value.errno == errno.ENOENT
        with pytest.raises(KernelError) as exist:
            map_update_elem(m, u32(7), bytes(8), MapUpdateFlag.BPF_EXIST)
        assert exist.value.errno == errno.ENOENT
        map_update_elem(m, u32(1), u64(11), MapUpdateFlag.BPF_NOEXIST)
        with pytest.raises(KernelError) as eexist:
            map_update_elem(m, u32(1), u64(12), MapUpdateFlag.BPF_NOEXIST)
        assert eexist.value.errno == errno.EEXIST
        map_update_elem(m, u32(2), u64(22))
        with pytest.raises(KernelError) as full:
            map_update_elem(m, u32(3), u64(33))
        assert full.value.errno == errno.E2BIG
        assert sorted(map_keys(m, 4)) == [u32(1), u32(2)]
        assert sorted(map_lookup_batch(m, 4, 8, batch=1)) == [(u32(1), u64(11)),
                                                               (u32(2), u64(22))]
        map_delete_elem(m, u32(1))
        assert map_lookup_elem(m, u32(1), 8) is None


def test_batch_update_and_delete() -> None:
    with map_create(HASH, 4, 8, 16) as m:
        keys = [u32(i) for i in range(10)]
        assert map_update_batch(m, keys, [u64(i * i) for i in range(10)]) == 10
        assert dict(map_lookup_batch(m, 4, 8, batch=3)) == {u32(i): u64(i * i)
                                                            for i in range(10)}
        assert map_delete_batch(m, keys[:4]) == 4
        assert sorted(map_keys(m, 4)) == keys[4:]
        with pytest.raises(KernelError) as enoent:
            map_delete_batch(m, [u32(0)])
        assert enoent.value.errno == errno.ENOENT


def test_queue_map_push_pop() -> None:
    with map_create(BpfMapType.BPF_MAP_TYPE_QUEUE, 0, 4, 4) as q:
        for n in (5, 6):
            map_update_elem(q, b"", u32(n))
        assert map_lookup_and_delete_elem(q, b"", 4) == u32(5)
        assert map_lookup_and_delete_elem(q, b"", 4) == u32(6)
        assert map_lookup_and_delete_elem(q, b"", 4) is None


def test_frozen_map_is_a_kernel_error_not_unavailable() -> None:
    with map_create(ARRAY, 4, 8, 1) as m:
        map_freeze(m)
        with pytest.raises(KernelError) as exc:
            map_update_elem(m, u32(0), bytes(8))
        assert exc.value.errno == errno.EPERM
        assert not isinstance(exc.value, BPFUnavailable)
        assert map_lookup_elem(m, u32(0), 8) == bytes(8)


def test_map_create_failure() -> None:
    with pytest.raises(KernelError) as exc:
        map_create(HASH, 0, 8, 1)  # hash keys cannot be empty
    assert exc.value.errno == errno.EINVAL
    assert "BPF_MAP_CREATE" in str(exc.value)


def test_percpu_values_through_bpfmap() -> None:
    ncpu = possible_cpus()
    assert ncpu >= 1
    with BpfMap(BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 4, 2) as m:
        assert m.user_value_size == 8 * ncpu
        value = b"".join(u64(c + 1) for c in range(ncpu))
        m.update(u32(1), value)
        assert m.lookup(u32(1)) == value
        with pytest.raises(ValueError):
            m.lookup(b"\0")
        assert dict(m.items())[u32(1)] == value


def test_map_info_and_ids() -> None:
    with map_create(HASH, 4, 16, 32, MapFlag.BPF_F_NO_PREALLOC, name="pyxdp_info") as m:
        info = map_get_info(m)
        assert isinstance(info, MapInfo)
        assert (info.type, info.key_size, info.value_size, info.max_entries) == (HASH, 4, 16, 32)
        assert info.map_flags == MapFlag.BPF_F_NO_PREALLOC and info.name == "pyxdp_info"
        assert obj_get_info_by_fd(m.fd) == info  # bare int: kind found by the kernel
        assert map_get_next_id(info.id - 1) == info.id
        with map_get_fd_by_id(info.id) as again:
            assert map_get_info(again).id == info.id


# ---------------------------------------------------------------- programs

def test_prog_load_and_info() -> None:
    with map_create(ARRAY, 4, 8, 1) as m:
        insns = [*ld_imm64(1, m.fd, src=1), *exit_with(XdpAction.XDP_PASS)]
        with prog_load(XDP, insns, name="pyxdp_prog") as p:
            assert p.kind == "prog"
            info = prog_get_info(p)
            assert isinstance(info, ProgInfo)
            assert info.type == XDP and info.name == "pyxdp_prog"
            assert info.xlated_prog_len == 8 * len(insns)
            assert len(info.tag) == 8 and len(info.tag_hex) == 16
            assert info.gpl_compatible and info.verified_insns >= 3
            assert info.map_ids == (map_get_info(m).id,) and info.nr_map_ids == 1
            assert obj_get_info_by_fd(p) == info
            assert prog_get_next_id(info.id - 1) == info.id
            with prog_get_fd_by_id(info.id) as again:
                assert prog_get_info(again).tag == info.tag


def test_prog_load_accepts_raw_bytes_and_checks_length() -> None:
    raw = b"".join(i.encode() for i in exit_with(1))
    with prog_load(XDP, raw) as p:
        assert prog_test_run(p, bytes(14)).retval == 1
    with pytest.raises(InvalidProgram):
        prog_load(XDP, raw[:-1])


def test_verifier_error_keeps_the_whole_log() -> None:
    with pytest.raises(VerifierError) as exc:
        prog_load(XDP, [Instruction(0x95)])  # exit without setting r0
    err = exc.value
    assert err.errno == errno.EACCES and err.op == "BPF_PROG_LOAD"
    assert "0: (95) exit" in err.log and "R0 !read_ok" in err.log
    assert "processed 1 insns" in err.log
    assert verifier_reason(err.log) == "R0 !read_ok"
    assert last_insn_pc(err.log) == 0


def test_verifier_log_grows_past_enospc() -> None:
    # 300 instructions of log with a 128-byte first buffer: the kernel says
    # ENOSPC (even though the real error is EACCES) until the buffer fits.
    body = [Instruction(0xB7, 2, 0, 0, i) for i in range(300)]
    with pytest.raises(VerifierError) as exc:
        prog_load(XDP, [*body, Instruction(0x95)], log_size=128)
    err = exc.value
    assert err.errno == errno.EACCES
    assert err.log.startswith("func#0") or err.log.startswith("0:")
    assert "299: (b7) r2 = 299" in err.log and "R0 !read_ok" in err.log


def test_verifier_error_without_log() -> None:
    with pytest.raises(VerifierError) as exc:
        prog_load(XDP, [Instruction(0x95)], log_level=0)
    assert exc.value.errno == errno.EACCES and exc.value.log == ""
    assert verifier_reason("") == "no verifier log"


def test_unknown_program_type_is_a_verifier_error_with_errno() -> None:
    with pytest.raises(VerifierError) as exc:
        prog_load(999, exit_with(0))
    assert exc.value.errno == errno.EINVAL


def test_prog_test_run_retval_data_duration() -> None:
    # *(u8 *)(data + 0) = 0xab; r0 = XDP_TX
    insns = [
        Instruction(0x61, 2, 1, 4),  # r2 = ctx->data_end
        Instruction(0x61, 1, 1, 0),  # r1 = ctx->data
        Instruction(0xBF, 3, 1),  # r3 = r1
        Instruction(0x07, 3, 0, 0, 1),  # r3 += 1
        Instruction(0x2D, 3, 2, 1),  # if r3 > r2 goto +1
        Instruction(0x72, 1, 0, 0, 0xAB),  # *(u8 *)(r1 + 0) = 0xab
        *exit_with(XdpAction.XDP_TX),
    ]
    packet = bytes(range(64))
    with prog_load(XDP, insns) as p:
        res = prog_test_run(p, packet, repeat=1000)
        assert isinstance(res, TestRunResult)
        assert res.retval == XdpAction.XDP_TX
        assert res.data_out == b"\xab" + packet[1:]
        assert res.ctx_out is None and res.duration_ns >= 0
        with pytest.raises(AttributeError):
            res.retval = 0  # type: ignore[misc]


def test_prog_test_run_ctx_in_out() -> None:
    with prog_load(XDP, exit_with(XdpAction.XDP_PASS)) as p:
        ctx = struct.pack("=6I", 0, 20, 0, 0, 0, 0)
        res = prog_test_run(p, bytes(20), ctx_in=ctx)
        assert res.ctx_out is not None and len(res.ctx_out) == 24
        assert struct.unpack("=6I", res.ctx_out)[:2] == (0, 20)


def test_prog_test_run_enospc_keeps_partial_output() -> None:
    with prog_load(XDP, exit_with(XdpAction.XDP_DROP)) as p:
        with pytest.raises(TestRunOutputTruncated) as exc:
            prog_test_run(p, bytes(range(100)), data_size_out=20)
        err = exc.value
        assert isinstance(err, KernelError) and err.errno == errno.ENOSPC
        assert err.data_size == 100
        assert err.result.retval == XdpAction.XDP_DROP
        assert err.result.data_out == bytes(range(20))


def test_prog_test_run_errors() -> None:
    with prog_load(XDP, exit_with(0)) as p:
        with pytest.raises(KernelError) as short:
            prog_test_run(p, bytes(13))  # below ETH_HLEN
        assert short.value.errno == errno.EINVAL
    with map_create(ARRAY, 4, 8, 1) as m:
        with pytest.raises(KernelError) as not_prog:
            prog_test_run(m, bytes(14))
        assert not_prog.value.errno == errno.EINVAL


# ---------------------------------------------------------------- BTF

def _btf(types: bytes, strings: bytes) -> bytes:
    hdr = struct.pack("=HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(strings))
    return hdr + types + strings


def test_btf_load() -> None:
    # One type: int, 4 bytes, 32 bits, signed.
    int_t = struct.pack("=IIII", 1, 1 << 24, 4, (1 << 24) | 32)
    with btf_load(_btf(int_t, b"\0int\0")) as fd:
        assert fd.kind == "btf"
    bad = struct.pack("=IIII", 99, 1 << 24, 4, 32)  # name offset past the strings
    with pytest.raises(KernelError) as exc:
        btf_load(_btf(bad, b"\0int\0"))
    assert exc.value.errno == errno.EINVAL
    assert "name" in str(exc.value).lower() or "offset" in str(exc.value).lower()


def test_no_raw_oserror_on_bad_fd() -> None:
    with pytest.raises(KernelError) as exc:
        map_lookup_elem(987654, u32(0), 8)
    assert exc.value.errno == errno.EBADF
    assert isinstance(Fd(os.dup(0)), Fd)
