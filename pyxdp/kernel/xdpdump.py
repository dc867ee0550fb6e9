"""xdpdump's capture on Linux: fentry/fexit programs on an attached XDP program.

As xdp-tools' xdpdump does with ``--rx-capture entry,exit``: a
``BPF_PROG_TYPE_TRACING`` program per capture point, loaded with
``attach_prog_fd`` (the XDP program) and ``attach_btf_id`` (the type of its
main function, ``func_info[0]`` of its BTF), attached through a BPF
trampoline (``kernel/bpf/trampoline.c``). The kernel hands the program the XDP
program's arguments as u64 slots: slot 0 is the ``struct xdp_md *`` argument,
which the verifier types as the kernel's ``struct xdp_buff`` it really is
(``btf_translate_to_vmlinux``); an fexit program also gets the return value,
the verdict, in slot 1.

The programs are built here with pyxdp's instruction builders. Each keeps
only frames of the capture's interface (``xdp->rxq->dev->ifindex``, the
offset from the kernel's BTF: one program may be attached to several
devices), copies the record header (time, ifindex, rx queue, length, verdict)
and up to ``snaplen`` bytes of the frame's linear part
(``bpf_probe_read_kernel``) into a per-CPU scratch value, and sends it with
``bpf_ringbuf_output`` to a ring buffer user space reads
(:class:`~pyxdp.kernel.ringbuf.RingBuffer`). The bytes of an fexit record
are the frame as the program left it. Where the frame went after
``XDP_REDIRECT`` is the kernel's per-CPU redirect state, which a tracing
program cannot read: kernel records carry the verdict only.
"""

from __future__ import annotations

import ctypes
import struct
import time
from dataclasses import dataclass

from pyxdp.asm import macros as m
from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction, ld_imm64
from pyxdp.errors import KernelError, NotSupportedError, PyxdpError
from pyxdp.kernel.ringbuf import RingBuffer
from pyxdp.kernel.syscall import (
    Fd,
    _attr,
    _call,
    _get32,
    _get_info,
    _put32,
    _put64,
    map_create,
    prog_get_fd_by_id,
    prog_load,
)
from pyxdp.uapi.bpf import BpfAttachType, BpfCmd, BpfMapType, BpfProgType

__all__ = ["CAPTURE_POINTS", "CaptureRecord", "XdpTraceCapture", "main_func_type_id"]

CAPTURE_POINTS = ("entry", "exit")
# The biggest linear frame copied: a per-CPU value is at most 32 KiB.
MAX_CAPTURE = 16384
_RINGBUF_SIZE = 1 << 22
_HDR = struct.Struct("=QIIIIII")  # ts, ifindex, queue, pkt_len, cap_len, verdict, point
# struct bpf_prog_info: btf_id @128, func_info_rec_size @132, func_info @136,
# nr_func_info @144 (include/uapi/linux/bpf.h).
_PROG_INFO_SIZE = 232
_RAW_TP_OPEN_SIZE = 16  # name @0, prog_fd @8
_H_MAP_LOOKUP, _H_KTIME, _H_PROBE_READ_KERNEL, _H_RINGBUF_OUTPUT = 1, 5, 113, 130


@dataclass(frozen=True, slots=True)
class CaptureRecord:
    """One frame at one capture point: ``verdict`` is None at entry."""

    point: str
    ts_ns: int  # wall clock
    ifindex: int
    queue: int
    pkt_len: int
    data: bytes
    verdict: int | None


def main_func_type_id(prog_fd: Fd | int) -> int:
    """The BTF type id of an XDP program's main function (``func_info[0]``)."""
    info = ctypes.create_string_buffer(_PROG_INFO_SIZE)
    _get_info(prog_fd, info)
    btf_id, n = _get32(info, 128), _get32(info, 144)
    if not btf_id or not n:
        raise NotSupportedError("the attached XDP program has no BTF function info "
                                "(fentry/fexit capture needs it)")
    rec = _get32(info, 132)
    recs = ctypes.create_string_buffer(rec * n)
    info = ctypes.create_string_buffer(_PROG_INFO_SIZE)
    _put32(info, 132, rec)
    _put64(info, 136, ctypes.addressof(recs))
    _put32(info, 144, n)
    _get_info(prog_fd, info)
    insn_off, type_id = struct.unpack_from("=II", recs, 0)
    return int(type_id)


def _net_device_ifindex_offset() -> int:
    from pyxdp.btf import BtfKind
    from pyxdp.btf.vmlinux import kernel_btf_index
    ix = kernel_btf_index()
    sid = ix.find("net_device", BtfKind.STRUCT) if ix is not None else None
    if ix is None or sid is None:
        raise NotSupportedError("fentry/fexit capture needs the kernel's BTF "
                                "(/sys/kernel/btf/vmlinux)")
    for mem in ix.type_by_id(sid).members:
        if mem.name == "ifindex":
            return int(mem.bit_offset // 8)
    raise NotSupportedError("struct net_device has no ifindex in the kernel's BTF")


def capture_program(point: str, ifindex: int, ifindex_off: int, scratch_fd: int,
                    ringbuf_fd: int, snaplen: int) -> tuple[Instruction, ...]:
    """The fentry (``point="entry"``) or fexit program of one capture."""
    r = []
    r += [m.mov64_reg(6, 1),
          m.ldx_mem(8, 7, 6, 0),            # r7 = (struct xdp_buff *)ctx[0]
          m.ldx_mem(8, 1, 7, 32),           # xdp->rxq
          m.ldx_mem(8, 2, 1, 0),            # rxq->dev
          m.ldx_mem(4, 9, 2, ifindex_off),  # dev->ifindex
          m.jmp_imm(op.BPF_JNE, 9, ifindex, 0),  # -> out (patched below)
          m.st_mem(4, 10, -4, 0),
          m.mov64_reg(2, 10), m.alu64_imm(op.BPF_ADD, 2, -4),
          *ld_imm64(1, scratch_fd, op.PseudoSrc.BPF_PSEUDO_MAP_FD),
          m.call_helper(_H_MAP_LOOKUP),
          m.jmp_imm(op.BPF_JEQ, 0, 0, 0),   # -> out
          m.mov64_reg(8, 0),
          m.call_helper(_H_KTIME),
          m.stx_mem(8, 8, 0, 0),
          m.stx_mem(4, 8, 9, 8),            # ifindex
          m.ldx_mem(8, 1, 7, 32),
          m.ldx_mem(4, 1, 1, 8),            # rxq->queue_index
          m.stx_mem(4, 8, 1, 12),
          m.ldx_mem(8, 1, 7, 0),            # xdp->data
          m.ldx_mem(8, 2, 7, 8),            # xdp->data_end
          m.alu64_reg(op.BPF_SUB, 2, 1),
          m.stx_mem(4, 8, 2, 16),           # pkt_len (the linear part)
          m.jmp_imm(op.BPF_JLE, 2, snaplen, 1),
          m.mov64_imm(2, snaplen),
          m.stx_mem(4, 8, 2, 20),           # cap_len
          m.mov64_reg(9, 2)]
    if point == "exit":
        r += [m.ldx_mem(8, 1, 6, 8), m.stx_mem(4, 8, 1, 24)]  # the verdict
    r += [m.st_mem(4, 8, 28, CAPTURE_POINTS.index(point))]
    r += [m.mov64_reg(1, 8), m.alu64_imm(op.BPF_ADD, 1, _HDR.size),
          m.mov64_reg(2, 9), m.ldx_mem(8, 3, 7, 0),
          m.call_helper(_H_PROBE_READ_KERNEL),
          *ld_imm64(1, ringbuf_fd, op.PseudoSrc.BPF_PSEUDO_MAP_FD),
          m.mov64_reg(2, 8), m.mov64_reg(3, 9), m.alu64_imm(op.BPF_ADD, 3, _HDR.size),
          m.mov64_imm(4, 0),
          m.call_helper(_H_RINGBUF_OUTPUT)]
    out = len(r)
    r += [m.mov64_imm(0, 0), m.exit_insn()]
    # The two forward jumps to "out": the ifindex test and the lookup's NULL test.
    for pc, i in enumerate(r):
        if i.code in (op.BPF_JMP | op.BPF_JNE | op.BPF_K, op.BPF_JMP | op.BPF_JEQ | op.BPF_K) \
                and i.off == 0:
            r[pc] = Instruction(i.code, i.dst, i.src, out - pc - 1, i.imm)
    return tuple(r)


class XdpTraceCapture:
    """Capture the frames an attached XDP program sees on one interface.

    ``prog_id`` is the XDP program (as ``pyxdp status`` shows it), ``ifindex``
    the interface; ``points`` a subset of :data:`CAPTURE_POINTS`. Use as a
    context manager; :meth:`read` returns the records captured since the last
    call. Closing detaches everything.
    """

    def __init__(self, prog_id: int, ifindex: int, *, points: tuple[str, ...] = ("exit",),
                 snaplen: int = 262144) -> None:
        bad = [p for p in points if p not in CAPTURE_POINTS]
        if bad or not points:
            raise PyxdpError(f"capture points are entry and/or exit, not {','.join(bad)!r}")
        self.points = points
        self.snaplen = max(1, min(snaplen, MAX_CAPTURE))
        self._fds: list[Fd] = []
        self._ring: RingBuffer | None = None
        # ktime (CLOCK_MONOTONIC) to the wall clock pcapng wants.
        self._wall_offset = time.time_ns() - time.monotonic_ns()
        try:
            self._setup(prog_id, ifindex)
        except BaseException:
            self.close()
            raise

    def _setup(self, prog_id: int, ifindex: int) -> None:
        target = prog_get_fd_by_id(prog_id)
        self._fds.append(target)
        type_id = main_func_type_id(target)
        ifindex_off = _net_device_ifindex_offset()
        scratch = map_create(BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY, 4,
                             _HDR.size + self.snaplen, 1, name="xdpdump_buf")
        self._fds.append(scratch)
        self._ring = RingBuffer(_RINGBUF_SIZE, "xdpdump_rb")
        for point in self.points:
            insns = capture_program(point, ifindex, ifindex_off, scratch.fileno(),
                                    self._ring.fd.fileno(), self.snaplen)
            kind = (BpfAttachType.BPF_TRACE_FENTRY if point == "entry"
                    else BpfAttachType.BPF_TRACE_FEXIT)
            prog = prog_load(BpfProgType.BPF_PROG_TYPE_TRACING, insns, "GPL",
                             name=f"xdpdump_{point}", expected_attach_type=kind,
                             attach_btf_id=type_id, attach_prog_fd=target)
            self._fds.append(prog)
            attr = _attr(_RAW_TP_OPEN_SIZE)
            _put32(attr, 8, prog.fileno())
            self._fds.append(Fd(_call(BpfCmd.BPF_RAW_TRACEPOINT_OPEN, attr), "link"))

    def wait(self, timeout_s: float) -> None:
        if self._ring is not None:
            self._ring.wait(timeout_s)

    def read(self, limit: int = 1 << 30) -> list[CaptureRecord]:
        if self._ring is None:
            raise KernelError("xdpdump", 9, "the capture is closed")
        out = []
        for raw in self._ring.read(limit):
            ts, ifindex, queue, pkt_len, cap_len, verdict, point = _HDR.unpack_from(raw, 0)
            exit_ = CAPTURE_POINTS[point] == "exit"
            out.append(CaptureRecord(CAPTURE_POINTS[point], ts + self._wall_offset,
                                     ifindex, queue, pkt_len,
                                     raw[_HDR.size:_HDR.size + cap_len],
                                     verdict if exit_ else None))
        return out

    def close(self) -> None:
        for fd in reversed(self._fds):  # links first: they hold the programs
            fd.close()
        self._fds.clear()
        if self._ring is not None:
            self._ring.close()
            self._ring = None

    def __enter__(self) -> XdpTraceCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
