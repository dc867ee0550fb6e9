"""pyxdp: XDP, the Linux eXpress Data Path, in Python."""

from pyxdp.errors import (
    AsmError,
    BPFUnavailable,
    BudgetExceeded,
    ConformanceFormatError,
    HelperFault,
    InvalidProgram,
    KernelError,
    MapError,
    MemoryFault,
    NotSupportedError,
    ObjectError,
    ProgramFault,
    PyxdpError,
    TestRunTruncated,
    UnsupportedHelper,
    VerifierError,
)

__version__ = "0.1.0"

__all__ = [
    "AsmError",
    "BPFUnavailable",
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
    "PyxdpError",
    "TestRunTruncated",
    "UnsupportedHelper",
    "VerifierError",
    "__version__",
]
