"""The one exception tree of pyxdp.

Every error pyxdp raises on purpose derives from :class:`PyxdpError`::

    PyxdpError
    ├── InvalidProgram        bytecode rejected at load (pc, instruction, rule)
    │   └── UnsupportedHelper a call to a helper the engine lacks (also NotSupportedError)
    ├── AsmError              assembler text that does not parse (line, reason)
    ├── BadArgument           a public function called with a wrong type or range
    │                         (also TypeError and ValueError); names the parameter
    ├── ConformanceFormatError a .data vector file that does not parse
    ├── ObjectError           an object file or BTF blob that does not parse (file, section)
    ├── ProgramFault          a run stopped: the program did something illegal
    │   ├── MemoryFault       access outside every region (pc, addr, size, region)
    │   ├── BudgetExceeded    instruction budget used up
    │   └── HelperFault       a helper was called in a way it cannot serve
    ├── NotSupportedError     a valid feature pyxdp does not provide (names it)
    ├── MapError              a map operation refused with the kernel's errno
    ├── PageAccountingError   a page returned twice or leaked (pyxdp.net.page_pool)
    ├── TestRunTruncated      test_run output did not fit (ENOSPC); keeps what was copied
    └── KernelError           a bpf(2)/netlink call failed (errno kept)
        ├── BPFUnavailable    not root / no BPF on this machine
        └── VerifierError     a verifier refused the program (Linux's or pyxdp's);
                              keeps the whole log

The CLI turns any of them into one line on stderr and exit code 2.
"""

from __future__ import annotations

import errno as _errno
import os

__all__ = [
    "AsmError",
    "BPFUnavailable",
    "BadArgument",
    "BudgetExceeded",
    "ConformanceFormatError",
    "HelperFault",
    "InvalidProgram",
    "KernelError",
    "MapError",
    "MemoryFault",
    "NotSupportedError",
    "ObjectError",
    "ProgramFault",
    "PyxdpWarning",
    "PyxdpError",
    "TestRunTruncated",
    "UnsupportedHelper",
    "VerifierError",
]


class PyxdpError(Exception):
    """Base of every error pyxdp raises on purpose."""


class PyxdpWarning(UserWarning):
    """Something pyxdp works around, said once (a cache directory it cannot write)."""


class InvalidProgram(PyxdpError):
    """Bytecode that fails load-time validation.

    ``pc`` is the slot index of the offending instruction (``None`` for
    whole-program rules such as an empty program), ``insn`` its text and
    ``rule`` the short name of the rule it broke.
    """

    def __init__(self, message: str, *, pc: int | None = None, insn: str = "",
                 rule: str = "") -> None:
        self.pc = pc
        self.insn = insn
        self.rule = rule
        where = f"pc {pc}: " if pc is not None else ""
        what = f" ({insn})" if insn else ""
        tag = f" [{rule}]" if rule else ""
        super().__init__(f"invalid program: {where}{message}{what}{tag}")


class AsmError(PyxdpError):
    """Assembler input that does not parse."""

    def __init__(self, message: str, *, line: int | None = None, text: str = "") -> None:
        self.line = line
        self.text = text
        where = f"line {line}: " if line is not None else ""
        src = f": {text.strip()!r}" if text.strip() else ""
        super().__init__(f"asm: {where}{message}{src}")


class BadArgument(PyxdpError, TypeError, ValueError):
    """A documented function called with an argument of the wrong type or outside its
    range (:mod:`pyxdp.args`): the message names the function and the parameter. It is
    a TypeError and a ValueError too, for callers checking Python arguments."""


class ConformanceFormatError(PyxdpError):
    """A conformance ``.data`` file that does not follow the format."""


class ObjectError(PyxdpError):
    """An object file or BTF blob that does not parse; names the file and section.

    ``path`` is the object file (empty when parsing bytes) and ``section``
    the ELF section (empty for whole-file problems such as a bad header).
    """

    def __init__(self, message: str, *, path: str = "", section: str = "") -> None:
        self.path = path
        self.section = section
        self.reason = message
        where = path or "<bytes>"
        sec = f" section {section!r}" if section else ""
        super().__init__(f"{where}:{sec} {message}" if sec else f"{where}: {message}")


class ProgramFault(PyxdpError):
    """A program run stopped because the program did something illegal.

    ``pc`` and ``insn`` name the instruction; ``source`` is the C source
    line when BTF line info is known.
    """

    def __init__(self, message: str, *, pc: int | None = None, insn: str = "",
                 source: str = "") -> None:
        self.pc = pc
        self.insn = insn
        self.source = source
        self.reason = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"pc {self.pc}" if self.pc is not None else "?"
        what = f" ({self.insn})" if self.insn else ""
        src = f" at {self.source}" if self.source else ""
        return f"{where}{what}{src}: {self.reason}"

    def with_source(self, source: str) -> ProgramFault:
        """Attach the C source line (from BTF line info) to the report."""
        self.source = source
        self.args = (self._render(),)
        return self


class MemoryFault(ProgramFault):
    """Load, store or atomic outside every memory region."""

    def __init__(self, message: str, *, pc: int | None = None, insn: str = "",
                 address: int = 0, size: int = 0, region: str = "") -> None:
        self.address = address
        self.size = size
        self.region = region
        super().__init__(message, pc=pc, insn=insn)


class BudgetExceeded(ProgramFault):
    """The run executed more instructions than its budget allows."""


class HelperFault(ProgramFault):
    """A helper call that cannot be served (unknown id, bad arguments)."""


class NotSupportedError(PyxdpError):
    """A valid eBPF/XDP feature that pyxdp does not provide; names it."""


class KernelError(PyxdpError):
    """A bpf(2) or netlink call failed; ``errno`` holds the error number."""

    def __init__(self, op: str, err: int, detail: str = "") -> None:
        self.op = op
        self.errno = err
        name = _errno.errorcode.get(err, str(err))
        extra = f": {detail}" if detail else ""
        super().__init__(f"{op} failed: {name} ({os.strerror(err)}){extra}")


class BPFUnavailable(KernelError):
    """The kernel backend cannot be used here (no privileges or no BPF)."""


class VerifierError(KernelError):
    """A verifier refused a program: Linux's at BPF_PROG_LOAD, or pyxdp's own
    (:mod:`pyxdp.verifier`) before a userspace load.

    ``log`` is the whole log, ``reason`` its last meaningful line (Linux's
    message for the failure). pyxdp's verifier also sets ``pc``, ``insn``
    (the instruction's text), ``source`` (the C line from BTF line info) and
    ``state`` (the registers at ``pc``, as the kernel's log prints them).
    """

    def __init__(self, op: str, err: int, log: str, *, pc: int | None = None, insn: str = "",
                 source: str = "", state: str = "") -> None:
        from pyxdp.kernel.verifier_log import verifier_reason  # pure text parsing, no syscalls

        self.log = log
        self.pc = pc
        self.insn = insn
        self.source = source
        self.state = state
        reason = verifier_reason(log)
        if pc is None:
            super().__init__(op, err, reason)
            return
        where = f" at pc {pc} ({insn})" + (f" at {source}" if source else "")
        KernelError.__init__(self, f"{op}: verifier", err, f"{reason}{where}")

    @property
    def reason(self) -> str:
        """The last meaningful line of the log: the verifier's message for the failure."""
        from pyxdp.kernel.verifier_log import verifier_reason

        return verifier_reason(self.log)


class UnsupportedHelper(InvalidProgram, NotSupportedError):
    """The program calls a helper this engine does not provide; names the helper."""

    def __init__(self, message: str, *, pc: int | None = None, insn: str = "",
                 helper_id: int = 0) -> None:
        self.helper_id = helper_id
        super().__init__(message, pc=pc, insn=insn, rule="helper")


class TestRunTruncated(PyxdpError):
    """BPF_PROG_TEST_RUN's ENOSPC: the program ran but its output did not fit.

    ``result`` holds what was copied (retval, duration, the leading bytes of
    data and context); ``data_size`` and ``ctx_size`` are what the kernel writes
    back to ``data_size_out``/``ctx_size_out``: the full sizes wanted, except when
    ``data_size_out`` is below the frags' bytes alone, where bpf_test_finish
    returns before writing anything and ``data_size`` stays ``data_size_out``
    (measured on Linux 6.18; both backends report the same).
    """

    __test__ = False  # not a pytest test class despite its name
    errno: int = _errno.ENOSPC  # on either backend, as the kernel's answer carries it

    def __init__(self, result: object, data_size: int, ctx_size: int, message: str = "") -> None:
        self.result = result
        self.data_size = data_size
        self.ctx_size = ctx_size
        super().__init__(message or f"test_run output needs {data_size} data / {ctx_size} ctx "
                                    f"bytes: ENOSPC")


ENOTSUPP = 524  # kernel-internal errno that bpf(2) and helpers leak to user space


class MapError(PyxdpError):
    """A map operation refused with a kernel errno (``.errno``; ``.op`` names the operation).

    ``errno`` is positive (``errno.ENOENT``...); 524 is the kernel's
    ``ENOTSUPP``. Batch operations also set ``.count``: the number of
    elements processed before the failure, as the kernel reports it. Both
    backends raise it, so code handles kernel and userspace maps alike.
    """

    def __init__(self, op: str, err: int, detail: str = "", *, count: int = 0) -> None:
        self.op = op
        self.errno = err
        self.count = count
        name = "ENOTSUPP" if err == ENOTSUPP else _errno.errorcode.get(err, str(err))
        text = "Unknown error 524" if err == ENOTSUPP else os.strerror(err)
        extra = f": {detail}" if detail else ""
        super().__init__(f"{op}: {name} ({text}){extra}")


def map_closed(op: str, name: str) -> MapError:
    """A map used after its collection (its descriptor) was closed: EBADF, on either backend."""
    return MapError(op, _errno.EBADF, f"map {name!r} is closed")


def program_closed(name: str) -> PyxdpError:
    """A program used after its collection (its descriptor) was closed."""
    return PyxdpError(f"program {name!r} is closed")
