"""Reading the eBPF verifier log (``kernel/bpf/verifier.c``, ``kernel/bpf/log.c``).

With ``log_level`` 1 the verifier prints each instruction it walks as
``pc: (opcode) text``, register states, and finally the reason it refused
the program followed by a statistics trailer (``processed N insns ...``).
These helpers pull the one line a human wants out of that.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["last_insn_pc", "verifier_reason"]

# Trailer and bookkeeping lines that are never the reason for a refusal.
_NOISE: Final = re.compile(
    r"^(processed \d+ insns|verification time \d+|stack depth \d|"
    r"-- END PROG LOAD LOG --|max_states_per_insn|peak_states|mark_read|"
    r"cur state:|old state:)")
_INSN: Final = re.compile(r"^(\d+): \([0-9a-f]{2}\)")


def _meaningful(log: str) -> list[str]:
    return [ln.strip() for ln in log.splitlines() if ln.strip() and not _NOISE.match(ln.strip())]


def verifier_reason(log: str) -> str:
    """The last meaningful line of a verifier log (the refusal reason).

    ``"no verifier log"`` when the log is empty, e.g. because the kernel
    refused the attributes before the verifier ran.
    """
    lines = _meaningful(log)
    return lines[-1] if lines else "no verifier log"


def last_insn_pc(log: str) -> int | None:
    """The pc of the last instruction the verifier printed before giving up."""
    for line in reversed(_meaningful(log)):
        m = _INSN.match(line)
        if m:
            return int(m.group(1))
    return None
