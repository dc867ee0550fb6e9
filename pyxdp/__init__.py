"""pyxdp: XDP, the Linux eXpress Data Path, in Python.

The curated public API: load an object (``Collection.load``), run its
programs (``Program.test_run``, whose ``retval`` is an :class:`XdpAction`),
read and write its maps (``Map``), on pyxdp's own engines or on Linux; the
XDP verdicts (``XDP_PASS``...); and the exception tree of :mod:`pyxdp.errors`.
Testing one's own program with pytest: :mod:`pyxdp.testing.pytest_plugin`.
``__version__`` is the package's version.
"""

from pyxdp.collection import Collection, Map, Program
from pyxdp.elf import load_collection_spec
from pyxdp.errors import (
    AsmError,
    BadArgument,
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
from pyxdp.uapi.bpf import XdpAction

XDP_ABORTED = XdpAction.XDP_ABORTED
XDP_DROP = XdpAction.XDP_DROP
XDP_PASS = XdpAction.XDP_PASS
XDP_TX = XdpAction.XDP_TX
XDP_REDIRECT = XdpAction.XDP_REDIRECT

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
    "PyxdpError",
    "TestRunTruncated",
    "UnsupportedHelper",
    "VerifierError",
    "XDP_ABORTED",
    "XDP_DROP",
    "XDP_PASS",
    "XDP_REDIRECT",
    "XDP_TX",
    "XdpAction",
    "__version__",
]
