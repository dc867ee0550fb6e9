"""pyxdp: XDP, the Linux eXpress Data Path, in Python.

The curated public API: load an object (``Collection.load``), run its
programs (``Program.test_run``), read and write its maps (``Map``), on pyxdp's
own engines or on Linux; and the exception tree of :mod:`pyxdp.errors`.
"""

from pyxdp.collection import Collection, Map, Program
from pyxdp.elf import load_collection_spec
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
from pyxdp.spec import CollectionSpec, MapSpec, ProgramSpec

__version__ = "0.1.0"

__all__ = [
    "AsmError",
    "Collection",
    "CollectionSpec",
    "Map",
    "MapSpec",
    "Program",
    "ProgramSpec",
    "load_collection_spec",
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
