"""pyxdp: XDP, the Linux eXpress Data Path, in Python.

The curated public API: load an object (``Collection.load``), run its
programs (``Program.test_run``, whose ``retval`` is an :class:`XdpAction`),
read and write its maps (``Map``), on pyxdp's own engines or on Linux; the
XDP verdicts (``XDP_PASS``...); and the exception tree of :mod:`pyxdp.errors`.
Testing one's own program with pytest: :mod:`pyxdp.testing.pytest_plugin`.
``__version__`` is the package's version.
"""

from typing import TYPE_CHECKING, Any

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
from pyxdp.uapi.bpf import XdpAction

if TYPE_CHECKING:
    from pyxdp.collection import Collection, Map, Program
    from pyxdp.elf import load_collection_spec
    from pyxdp.spec import CollectionSpec, MapSpec, ProgramSpec

# The loader, the verifier and the ELF reader (numpy, pyelftools) load on first use:
# ``import pyxdp`` (every ``pyxdp`` command, ``--help`` included) stays cheap.
_LAZY = {
    "Collection": "pyxdp.collection",
    "Map": "pyxdp.collection",
    "Program": "pyxdp.collection",
    "load_collection_spec": "pyxdp.elf",
    "CollectionSpec": "pyxdp.spec",
    "MapSpec": "pyxdp.spec",
    "ProgramSpec": "pyxdp.spec",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pyxdp' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
