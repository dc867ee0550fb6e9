"""BPF streams (``kernel/bpf/stream.c``, Linux 6.17+): a program's stdout and stderr.

Every loaded program has two streams of text, ``BPF_STDOUT`` (1) and
``BPF_STDERR`` (2) (``prog->aux->stream``). The program writes into them with
``bpf_stream_vprintk_impl(stream_id, fmt, args, len, aux__prog)`` (libbpf's
``bpf_stream_printk``); user space reads them with ``BPF_PROG_STREAM_READ_BY_FD``
(pyxdp: :meth:`pyxdp.collection.Program.stream_read`, on either backend). As
Linux 6.18 does it:

* the kfunc: ``-ENOENT`` for a stream other than 1 and 2; ``-EINVAL`` for an
  argument array whose length is no multiple of 8, longer than 12 arguments, or
  NULL with a length; the format is ``bpf_snprintf``'s (``bpf_bprintf_prepare``
  then a ``bstr_printf`` into a 1024-byte buffer: :func:`~pyxdp.vm.helpers_more.bpf_bprintf`,
  its errors the kfunc's); the message pushed is as long as the output would be
  without its NUL - ``-ENOMEM`` past 1024 bytes, and one of exactly 1024 bytes
  ends with the NUL ``bstr_printf`` cut it with - and ``-ENOSPC`` when it would
  take the stream to :data:`BPF_STREAM_MAX_CAPACITY` bytes unread; else 0;
* a read takes up to ``len`` bytes, oldest message first, a message split
  across reads where the reader's buffer ends; what is read frees its room.

Linux writes into stderr itself: ``ERROR: Timeout detected for may_goto
instruction`` when a may_goto loop runs past its time, ``ERROR: AA or ABBA
deadlock detected`` (or ``Timeout detected``) ``for bpf_res_spin_lock`` with the
lock's address and the CPU's held-lock table, each followed by ``CPU: .. UID: ..
PID: .. Comm: ..``, ``Call trace:`` and the kernel stack with symbols. pyxdp ends
a may_goto loop by its count, not by time, so it has no timeout; it has the AA
deadlock (-EDEADLK) but writes no report: the report is kernel state (addresses,
the held-lock table, the kernel's stack) that pyxdp has no counterpart of, and
Linux drops it on this machine (see -ENOMEM below), leaving nothing to compare.

Linux allocates each message with ``alloc_pages_nolock`` and fails the kfunc with
``-ENOMEM`` when that allocation fails (on a kernel still deferring its struct
page initialisation it always does); pyxdp's allocation does not fail.
"""

from __future__ import annotations

import errno
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyxdp.errors import HelperFault
from pyxdp.vm.helpers_more import (
    MAX_BPRINTF_BUF,
    MAX_BPRINTF_VARARGS,
    MemoryReader,
    bpf_bprintf,
    memory_reader,
    read_cstring,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyxdp.vm.interpreter import Interpreter

__all__ = ["BPF_STDERR", "BPF_STDOUT", "BPF_STREAM_MAX_CAPACITY", "STREAM_KFUNCS", "BpfStream",
           "ProgStreams"]

BPF_STDOUT = 1
BPF_STDERR = 2
# include/linux/bpf.h: the bytes a stream holds unread at most
BPF_STREAM_MAX_CAPACITY = 100_000
M32 = 0xFFFF_FFFF


@dataclass(eq=False)
class BpfStream:
    """``struct bpf_stream``: the messages not read yet, and the room they take."""

    capacity: int = 0
    _log: deque[bytes] = field(default_factory=deque)
    _consumed: int = 0  # bytes of the oldest message read already
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def push(self, msg: bytes) -> int:
        """``bpf_stream_push_str``: 0, or -ENOSPC when the stream is full."""
        with self._lock:
            if self.capacity >= BPF_STREAM_MAX_CAPACITY or \
                    self.capacity + len(msg) >= BPF_STREAM_MAX_CAPACITY:
                return -errno.ENOSPC
            self.capacity += len(msg)
            self._log.append(msg)
        return 0

    def read(self, size: int) -> bytes:
        """``bpf_stream_read``: up to ``size`` bytes, oldest first, consumed."""
        out = bytearray()
        with self._lock:
            while len(out) < size and self._log:
                msg = self._log[0]
                take = min(len(msg) - self._consumed, size - len(out))
                out += msg[self._consumed:self._consumed + take]
                self._consumed += take
                if self._consumed == len(msg):
                    self._log.popleft()
                    self._consumed = 0
                    self.capacity -= len(msg)
        return bytes(out)


@dataclass(eq=False)
class ProgStreams:
    """A loaded program's ``aux->stream``: stdout and stderr."""

    stdout: BpfStream = field(default_factory=BpfStream)
    stderr: BpfStream = field(default_factory=BpfStream)

    def get(self, stream_id: int) -> BpfStream | None:
        """``bpf_stream_get``: the stream, None for an id other than 1 and 2."""
        return self.stdout if stream_id == BPF_STDOUT else \
            self.stderr if stream_id == BPF_STDERR else None


def stream_vprintk(stream: BpfStream, fmt: bytes, args: bytes, read: MemoryReader) -> int:
    """``bpf_stream_vprintk_impl`` once its arguments are read: ``fmt`` (to its NUL),
    ``args`` the u64 array, ``read`` program memory for ``%s`` and ``%pI``."""
    count, written = bpf_bprintf(fmt, struct.unpack(f"<{len(args) // 8}Q", args), read,
                                 MAX_BPRINTF_BUF)
    if count < 0:
        return count
    if count > MAX_BPRINTF_BUF:  # bpf_stream_elem_alloc: more than the buffer holds
        return -errno.ENOMEM
    return stream.push(written[:count])


def _stream_vprintk_impl(vm: Interpreter, r1: int, r2: int, r3: int, r4: int,
                         r5: int) -> int:
    owner = getattr(vm, "owner", None)
    streams: ProgStreams | None = getattr(owner, "streams", None)
    if streams is None:
        raise HelperFault("bpf_stream_vprintk_impl: the engine runs no loaded program (run "
                          "it through a Program, whose streams it writes)")
    stream = streams.get(r1 & M32)
    if stream is None:
        return -errno.ENOENT & M32
    data_len = r4 & M32
    if data_len & 7 or data_len > MAX_BPRINTF_VARARGS * 8 or (data_len and not r3):
        return -errno.EINVAL & M32
    read = memory_reader(vm)
    fmt = read_cstring(read, r2, 1 << 16)
    if fmt is None:
        raise HelperFault(f"bpf_stream_vprintk_impl: format at {r2:#x} is not readable")
    args = vm.mem.read(r3, data_len) if data_len else b""
    return stream_vprintk(stream, fmt, args, read) & M32


# The kfunc by name (pyxdp.net.xdp_metadata.bind_kfuncs binds it); it has no native twin
# (bpf_snprintf and bpf_trace_printk have): the JIT calls it.
STREAM_KFUNCS: dict[str, Callable[..., int]] = {
    "bpf_stream_vprintk_impl": _stream_vprintk_impl,
}
