"""The real kernel as pyxdp's oracle: the bpf(2) system call without libbpf.

:mod:`pyxdp.kernel.syscall` creates maps, loads programs through the
verifier, runs them with ``BPF_PROG_TEST_RUN`` and reads object info.
"""

from pyxdp.kernel import syscall as _syscall
from pyxdp.kernel.syscall import *  # noqa: F403 - the package's face is the syscall layer

__all__ = list(_syscall.__all__)
