"""Conformance programs on the real kernel, as XDP programs under BPF_PROG_TEST_RUN.

A bpf_conformance vector is a bare eBPF program: on entry r1 points at the
vector's memory and r2 holds its length, r10 tops a 512-byte stack, and the
main function's ``exit`` returns the 64-bit r0. The kernel cannot run such a
program as is, so this module wraps it into an XDP program the way the
libbpf plugin of bpf_conformance does, and reads r0 back through a map::

    0           ja  +12                  ; over the epilogue
    1..12       epilogue:                ; every main-function exit lands here
                  *(u64 *)(r10 - 8) = r0
                  *(u32 *)(r10 - 12) = 0
                  r1 = map[result] ll    ; BPF_PSEUDO_MAP_FD
                  r2 = r10 - 12; r3 = r10 - 8; r4 = BPF_ANY
                  call bpf_map_update_elem
                  r0 = XDP_PASS; exit
    13..        prologue:
                  r2 = ctx->data_end; r1 = ctx->data
                  r1 += len; if r1 <= r2 goto +2; r0 = XDP_ABORTED; exit
                  r1 -= len; r2 = len    ; packet range proven: [data, data+len)
    offset..    the original program, main-function exits turned into ``ja 1``

The memory travels as the packet (zero-padded to ETH_HLEN, the smallest
packet XDP test runs accept) so the verifier tracks it as packet memory of
exactly ``len(mem)`` bytes; empty memory gives r1 = r2 = 0 as plain scalars.
Only slots are prepended, so every relative jump and call offset of the
original stays valid; subprograms (targets of pseudo calls) keep their own
exits. A missing packet can only come from a bug here, so the prologue's
failure path returns XDP_ABORTED, which the runner reports.
"""

from __future__ import annotations

import errno as _errno
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Self

from pyxdp.asm import opcodes as op
from pyxdp.asm.insn import Instruction, decode, ld_imm64
from pyxdp.errors import KernelError, VerifierError
from pyxdp.kernel.syscall import (
    Fd,
    map_create,
    map_lookup_elem,
    prog_load,
    prog_test_run,
)
from pyxdp.kernel.verifier_log import last_insn_pc, verifier_reason
from pyxdp.uapi.bpf import (
    ETH_HLEN,
    BpfFuncId,
    BpfMapType,
    BpfProgType,
    MapUpdateFlag,
    XdpAction,
    XdpMd,
)

__all__ = [
    "EPILOGUE_START",
    "KernelRejected",
    "KernelResult",
    "KernelRun",
    "KernelRunner",
    "WrappedProgram",
    "main_function_end",
    "pyxdp_refusal",
    "short_reason",
    "wrap_program",
]

EPILOGUE_START: Final = 1
"""Slot of the epilogue every main-function exit jumps to."""

_R0_SLOT: Final = -8  # r0 spill slot on the stack
_KEY_SLOT: Final = -12  # u32 key 0 for the result map
_U64: Final = struct.Struct("=Q")
_KEY0: Final = bytes(4)

# Opcodes spelled out from their fields, as the kernel's insn macros do.
_STX_DW: Final = op.BPF_STX | op.BPF_MEM | op.BPF_DW
_ST_W: Final = op.BPF_ST | op.BPF_MEM | op.BPF_W
_LDX_W: Final = op.BPF_LDX | op.BPF_MEM | op.BPF_W
_MOV64_X: Final = op.BPF_ALU64 | op.BPF_MOV | op.BPF_X
_MOV64_K: Final = op.BPF_ALU64 | op.BPF_MOV | op.BPF_K
_ADD64_K: Final = op.BPF_ALU64 | op.BPF_ADD | op.BPF_K
_JLE_X: Final = op.BPF_JMP | op.BPF_JLE | op.BPF_X


def short_reason(log: str) -> str:
    """The refusal reason of a verifier log: its last meaningful line."""
    return verifier_reason(log)


def main_function_end(insns: Sequence[Instruction]) -> int:
    """The slot where the main function ends: the first subprogram start, else ``len``.

    Subprograms are the targets of ``call`` with src_reg BPF_PSEUDO_CALL and
    of ld_imm64 with src_reg BPF_PSEUDO_FUNC (callbacks); like the verifier,
    everything from the lowest such target on belongs to subprograms.
    """
    end = len(insns)
    pc = 0
    while pc < len(insns):
        ins = insns[pc]
        target = None
        if ins.code == op.OP_CALL and ins.src == op.CallSrc.BPF_PSEUDO_CALL:
            target = pc + 1 + ins.imm
        elif ins.code == op.OP_LD_IMM64 and ins.src == op.PseudoSrc.BPF_PSEUDO_FUNC:
            target = pc + 1 + ins.imm
        if target is not None and 0 < target < end:
            end = target
        pc += 2 if ins.code == op.OP_LD_IMM64 else 1
    return end


def _jump(pc: int, target: int) -> Instruction:
    off = target - (pc + 1)
    if -0x8000 <= off <= 0x7FFF:
        return Instruction(op.OP_JA, off=off)
    return Instruction(op.OP_JA32, imm=off)  # gotol: 32-bit jump offset (ISA v4)


def _epilogue(map_fd: int) -> list[Instruction]:
    return [
        Instruction(_STX_DW, dst=10, src=0, off=_R0_SLOT),
        Instruction(_ST_W, dst=10, off=_KEY_SLOT, imm=0),
        *ld_imm64(1, map_fd, src=op.PseudoSrc.BPF_PSEUDO_MAP_FD),
        Instruction(_MOV64_X, dst=2, src=10),
        Instruction(_ADD64_K, dst=2, imm=_KEY_SLOT),
        Instruction(_MOV64_X, dst=3, src=10),
        Instruction(_ADD64_K, dst=3, imm=_R0_SLOT),
        Instruction(_MOV64_K, dst=4, imm=MapUpdateFlag.BPF_ANY),
        Instruction(op.OP_CALL, imm=BpfFuncId.BPF_FUNC_map_update_elem),
        Instruction(_MOV64_K, dst=0, imm=XdpAction.XDP_PASS),
        Instruction(op.OP_EXIT),
    ]


def _prologue(mem_len: int) -> list[Instruction]:
    if mem_len == 0:
        return [Instruction(_MOV64_K, dst=1, imm=0), Instruction(_MOV64_K, dst=2, imm=0)]
    # Only r1 and r2 are written, so a program reading any other register
    # before setting it is refused exactly as it would be on its own. r1 is
    # advanced and moved back rather than copied to keep r3 uninitialised.
    return [
        Instruction(_LDX_W, dst=2, src=1, off=XdpMd.data_end),
        Instruction(_LDX_W, dst=1, src=1, off=XdpMd.data),
        Instruction(_ADD64_K, dst=1, imm=mem_len),
        Instruction(_JLE_X, dst=1, src=2, off=2),
        Instruction(_MOV64_K, dst=0, imm=XdpAction.XDP_ABORTED),
        Instruction(op.OP_EXIT),
        Instruction(_ADD64_K, dst=1, imm=-mem_len),
        Instruction(_MOV64_K, dst=2, imm=mem_len),
    ]


@dataclass(frozen=True, slots=True)
class WrappedProgram:
    """The XDP program built around a conformance program.

    ``offset`` is the slot of the original program's first instruction, so
    original pc = wrapped pc - offset.
    """

    insns: tuple[Instruction, ...]
    offset: int
    original_len: int

    def original_pc(self, wrapped_pc: int) -> int | None:
        pc = wrapped_pc - self.offset
        return pc if 0 <= pc < self.original_len else None


def wrap_program(insns: Sequence[Instruction], mem_len: int, map_fd: int) -> WrappedProgram:
    """Wrap a conformance program into an XDP program writing r0 to ``map_fd``[0]."""
    epilogue = _epilogue(map_fd)
    head = [_jump(0, EPILOGUE_START + len(epilogue)), *epilogue, *_prologue(mem_len)]
    offset = len(head)
    main_end = main_function_end(insns)
    body = list(insns)
    for pc in range(main_end):
        if body[pc].code == op.OP_EXIT:
            body[pc] = _jump(offset + pc, EPILOGUE_START)
    return WrappedProgram(tuple(head + body), offset, len(insns))


def pyxdp_refusal(insns: Sequence[Instruction], mem_len: int) -> str | None:
    """What Linux's verifier says of the program as :class:`KernelRunner` would load it,
    from pyxdp's verifier (no root): ``"verifier: REASON"``, the text vectorgen writes in a
    vector's ``-- error``, or ``None`` when it would load."""
    from pyxdp.spec import MapRef, MapSpec, ProgramSpec
    from pyxdp.verifier import verify
    wrapped = wrap_program(insns, mem_len, 0)
    result = MapSpec("result", BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 8, 1)
    # The epilogue's ld_imm64 of the result map: slot 3 of the wrapper.
    spec = ProgramSpec("conformance", "xdp", wrapped.insns, license="GPL",
                       map_refs=(MapRef(EPILOGUE_START + 2, "result", "fd"),))
    try:
        verify(spec, {"result": result})
    except VerifierError as e:
        return f"verifier: {short_reason(e.log)}"
    return None


class KernelRejected(VerifierError):
    """The verifier refused a wrapped conformance program.

    Still a :class:`VerifierError` (``log`` is the whole log); ``reason`` is
    the refusal line, prefixed with the original program's pc when the
    verifier stopped inside it.
    """

    def __init__(self, err: VerifierError, program: WrappedProgram) -> None:
        super().__init__(err.op, err.errno, err.log)
        self.program = program
        self.args = (f"kernel verifier rejects the program: {self.reason}",)

    @property
    def reason(self) -> str:
        text = verifier_reason(self.log)
        wpc = last_insn_pc(self.log)
        if wpc is None:
            return text
        pc = self.program.original_pc(wpc)
        if pc is not None:
            return f"pc {pc}: {text}"
        if EPILOGUE_START <= wpc < self.program.offset:
            return f"at exit: {text}"
        return text


@dataclass(frozen=True, slots=True)
class KernelResult:
    """r0 at the main function's exit (unsigned 64-bit) and the memory afterwards."""

    r0: int
    mem_out: bytes


@dataclass(frozen=True, slots=True)
class KernelRun:
    """Everything one run produced: :class:`KernelResult` plus the raw test-run data.

    ``packet_out`` is the whole output packet, padding included;
    ``retval`` the XDP verdict of the wrapper (XDP_PASS when all went well).
    """

    r0: int
    mem_out: bytes
    packet_out: bytes
    retval: int
    duration_ns: int
    program: WrappedProgram


def _as_insns(insns: Sequence[Instruction] | bytes | bytearray) -> Sequence[Instruction]:
    if isinstance(insns, (bytes, bytearray)):
        return decode(insns)
    return insns


class KernelRunner:
    """Runs conformance programs on the kernel, one BPF_PROG_LOAD + TEST_RUN each.

    The result map is created once per runner; each program's descriptor is
    closed as soon as its run is over. Use as a context manager, or call
    :meth:`close`.
    """

    def __init__(self, *, log_level: int = 1, prog_name: str = "conformance") -> None:
        self._log_level = log_level
        self._prog_name = prog_name
        self._map: Fd | None = map_create(BpfMapType.BPF_MAP_TYPE_ARRAY, 4, 8, 1,
                                          name="pyxdp_r0")

    def _map_fd(self) -> Fd:
        if self._map is None or self._map.closed:
            raise ValueError("KernelRunner is closed")
        return self._map

    def wrap(self, insns: Sequence[Instruction] | bytes | bytearray,
             mem_len: int) -> WrappedProgram:
        """The XDP program :meth:`run` would load for these instructions."""
        return wrap_program(_as_insns(insns), mem_len, self._map_fd().fileno())

    def load(self, insns: Sequence[Instruction] | bytes | bytearray,
             mem_len: int) -> tuple[Fd, WrappedProgram]:
        """Wrap and load; the caller owns the returned program descriptor.

        Raises :class:`KernelRejected` when the verifier refuses the program.
        """
        program = self.wrap(insns, mem_len)
        try:
            fd = prog_load(BpfProgType.BPF_PROG_TYPE_XDP, program.insns, "GPL",
                           name=self._prog_name, log_level=self._log_level)
        except VerifierError as err:
            raise KernelRejected(err, program) from None
        return fd, program

    def run_detailed(self, insns: Sequence[Instruction] | bytes | bytearray,
                     mem: bytes | bytearray = b"") -> KernelRun:
        """Run once; return r0, the memory, the whole output packet and the verdict."""
        mem = bytes(mem)
        packet = mem + bytes(max(0, ETH_HLEN - len(mem)))
        fd, program = self.load(insns, len(mem))
        with fd:
            res = prog_test_run(fd, packet, data_size_out=len(packet))
        if res.retval != XdpAction.XDP_PASS:
            raise KernelError("BPF_PROG_TEST_RUN", _errno.EIO,
                              f"wrapped program returned {res.retval}, not through its epilogue")
        raw = map_lookup_elem(self._map_fd(), _KEY0, 8)
        if raw is None:  # an array slot always exists; this would be a kernel bug
            raise KernelError("BPF_MAP_LOOKUP_ELEM", _errno.ENOENT, "result slot missing")
        return KernelRun(r0=_U64.unpack(raw)[0], mem_out=res.data_out[:len(mem)],
                         packet_out=res.data_out, retval=res.retval,
                         duration_ns=res.duration_ns, program=program)

    def run(self, insns: Sequence[Instruction] | bytes | bytearray,
            mem: bytes | bytearray = b"") -> KernelResult:
        """Run once; r0 at exit and the first ``len(mem)`` bytes of memory afterwards.

        Raises :class:`KernelRejected` (a :class:`VerifierError`) when the
        kernel's verifier refuses the wrapped program.
        """
        run = self.run_detailed(insns, mem)
        return KernelResult(run.r0, run.mem_out)

    def run_full(self, insns: Sequence[Instruction] | bytes | bytearray,
                 mem: bytes | bytearray = b"") -> KernelResult:
        """Like :meth:`run`, but ``mem_out`` is the whole output packet (padding too)."""
        run = self.run_detailed(insns, mem)
        return KernelResult(run.r0, run.packet_out)

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
