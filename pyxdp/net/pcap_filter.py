"""pcap-filter(7) expressions on XDP frames: tcpdump's filters, run by pyxdp's engines.

An expression is compiled to classic BPF by libpcap itself (``pcap_compile`` on
``pcap_open_dead(DLT_EN10MB, snaplen)``, through ctypes: the compiler tcpdump
and xdpdump use, so every expression means what it means there), converted
to eBPF for an XDP frame as the kernel's ``bpf_convert_filter`` converts a
socket filter (:mod:`pyxdp.asm.cbpf`), and run as an XDP program on the
interpreter or the JIT: a batch of frames is one :meth:`XdpProg.run_batch`.
The program's return value is the classic filter's: 0 rejects the frame,
anything else is how many bytes of it to keep.

Without libpcap (the shared library ``libpcap.so.0.8``, Debian's
``libpcap0.8``) compiling raises :class:`FilterUnavailable`; an expression
libpcap refuses raises :class:`FilterSyntaxError` with libpcap's own message.
Frames are Ethernet: the expressions are compiled for DLT_EN10MB, as on an
XDP interface.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Iterable, Iterator, Sequence
from functools import cache

import numpy as np
import numpy.typing as npt

from pyxdp.args import checked, short
from pyxdp.asm.cbpf import SockFilter, convert_filter
from pyxdp.asm.insn import Instruction
from pyxdp.errors import BadArgument, NotSupportedError, PyxdpError
from pyxdp.net.pcap import MAXIMUM_SNAPLEN, CapturedPacket
from pyxdp.net.prog import XdpProg
from pyxdp.spec import ProgramSpec

__all__ = ["DLT_EN10MB", "DEFAULT_SNAPLEN", "FilterSyntaxError", "FilterUnavailable",
           "PacketFilter", "compile_filter", "filter_capture", "libpcap_available"]

DLT_EN10MB = 1
DEFAULT_SNAPLEN = MAXIMUM_SNAPLEN  # tcpdump's default
_PCAP_NETMASK_UNKNOWN = 0xFFFF_FFFF
_LIBPCAP_NAMES = ("pcap", "pcap.so.0.8", "pcap.so.1")
# Frames are laid out in rows of this many bytes past the longest one.
_ROW_ALIGN = 64


class FilterUnavailable(NotSupportedError):
    """libpcap, which compiles the expressions, is not installed."""


class FilterSyntaxError(PyxdpError):
    """libpcap refused the expression (its message, as tcpdump prints it)."""


class _BpfInsn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint32)]


class _BpfProgram(ctypes.Structure):
    _fields_ = [("bf_len", ctypes.c_uint), ("bf_insns", ctypes.POINTER(_BpfInsn))]


_lock = threading.Lock()  # pcap_compile's parser was not reentrant before libpcap 1.8


@cache
def _libpcap() -> ctypes.CDLL | None:
    names = [ctypes.util.find_library("pcap")] + [f"lib{n}" for n in _LIBPCAP_NAMES]
    for name in names:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.pcap_open_dead.restype = ctypes.c_void_p
        lib.pcap_open_dead.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.pcap_compile.restype = ctypes.c_int
        lib.pcap_compile.argtypes = [ctypes.c_void_p, ctypes.POINTER(_BpfProgram),
                                     ctypes.c_char_p, ctypes.c_int, ctypes.c_uint32]
        lib.pcap_geterr.restype = ctypes.c_char_p
        lib.pcap_geterr.argtypes = [ctypes.c_void_p]
        lib.pcap_freecode.argtypes = [ctypes.POINTER(_BpfProgram)]
        lib.pcap_close.argtypes = [ctypes.c_void_p]
        return lib
    return None


def libpcap_available() -> bool:
    """True when libpcap loads here (filter expressions can be compiled)."""
    return _libpcap() is not None


@checked(linktype=(-(1 << 31), (1 << 31) - 1))  # pcap_open_dead's int
def compile_filter(expression: str, *, snaplen: int = DEFAULT_SNAPLEN,
                   linktype: int = DLT_EN10MB, optimize: bool = True) -> tuple[SockFilter, ...]:
    """``pcap_compile``: the classic BPF program of a pcap-filter expression.

    The empty expression accepts every frame (``ret #snaplen``), as in tcpdump.
    """
    lib = _libpcap()
    if lib is None:
        raise FilterUnavailable("filter expressions need libpcap, which is not installed "
                                "(Debian: apt-get install libpcap0.8)")
    if not 0 < snaplen <= 0x7FFF_FFFF:
        raise FilterSyntaxError(f"snaplen {snaplen} is outside 1..2147483647")
    try:
        text = expression.encode()
    except UnicodeEncodeError:
        raise FilterSyntaxError(f"filter expression is not valid text: {expression!r}") \
            from None
    if b"\0" in text:
        raise FilterSyntaxError("filter expression contains a NUL byte")
    with _lock:
        handle = lib.pcap_open_dead(linktype, snaplen)
        if not handle:
            raise FilterUnavailable("libpcap could not open a capture handle (out of memory)")
        prog = _BpfProgram()
        try:
            if lib.pcap_compile(handle, ctypes.byref(prog), text, int(optimize),
                                _PCAP_NETMASK_UNKNOWN) != 0:
                err = (lib.pcap_geterr(handle) or b"").decode(errors="replace")
                raise FilterSyntaxError(f"filter expression {expression!r}: {err}")
            try:
                return tuple(SockFilter(prog.bf_insns[i].code, prog.bf_insns[i].jt,
                                        prog.bf_insns[i].jf, prog.bf_insns[i].k)
                             for i in range(prog.bf_len))
            finally:
                lib.pcap_freecode(ctypes.byref(prog))
        finally:
            lib.pcap_close(handle)


class PacketFilter:
    """A compiled expression, ready to run on frames.

    ``cbpf`` is libpcap's program, ``insns`` the eBPF one pyxdp runs (an XDP
    program: :mod:`pyxdp.asm.cbpf`); ``engine`` is pyxdp's ("auto", "jit",
    "interp"). :meth:`keep` returns each frame's classic-BPF verdict (bytes to
    keep, 0 to drop), :meth:`match` whether it passes.
    """

    @checked
    def __init__(self, expression: str, *, snaplen: int = DEFAULT_SNAPLEN,
                 engine: str = "auto") -> None:
        self._setup(expression, compile_filter(expression, snaplen=snaplen), engine)

    @classmethod
    def from_classic(cls, prog: Sequence[SockFilter], *, name: str = "classic",
                     engine: str = "auto") -> PacketFilter:
        """A filter from a classic program of its own (tcpdump -ddd's numbers)."""
        self = cls.__new__(cls)
        self._setup(name, tuple(prog), engine)
        return self

    def _setup(self, expression: str, prog: tuple[SockFilter, ...], engine: str) -> None:
        self.expression = expression
        self.cbpf = prog
        self.insns: tuple[Instruction, ...] = convert_filter(prog)
        self.spec = ProgramSpec("pcap_filter", "xdp", self.insns, license="GPL")
        self.prog = XdpProg(self.spec, {}, engine=engine)

    @property
    def engine(self) -> str:
        return str(self.prog.engine)

    def keep(self, packets: Sequence[bytes | bytearray | memoryview]
             ) -> npt.NDArray[np.uint32]:
        """Per frame: the filter's return value (0: no match; else bytes to keep)."""
        if not isinstance(packets, Sequence) or isinstance(packets, str | bytes | bytearray):
            raise BadArgument(f"PacketFilter.keep: packets must be a sequence of frames, not "
                              f"{short(packets)}")
        for i, p in enumerate(packets):
            if not isinstance(p, bytes | bytearray | memoryview):
                raise BadArgument(f"PacketFilter.keep: packets[{i}] must be bytes, bytearray "
                                  f"or memoryview, not {short(p)}")
        n = len(packets)
        if n == 0:
            return np.zeros(0, np.uint32)
        lens = np.fromiter((len(p) for p in packets), np.int64, n)
        row = max(_ROW_ALIGN, -(-int(lens.max()) // _ROW_ALIGN) * _ROW_ALIGN)
        frames = np.zeros((n, row), np.uint8)
        flat = frames.reshape(-1)
        for i, p in enumerate(packets):  # one memcpy per frame, nothing per byte
            flat[i * row:i * row + len(p)] = np.frombuffer(p, np.uint8)
        res = self.prog.run_batch(frames, np.zeros(n, np.int64), lens)
        if res.faulted.any():
            i = int(np.flatnonzero(res.faulted)[0])
            raise PyxdpError(f"filter {self.expression!r} faulted on frame {i}: "
                             f"{res.fault(i)}")
        return np.asarray(res.action, np.uint32)

    def match(self, packets: Sequence[bytes | bytearray | memoryview]
              ) -> npt.NDArray[np.bool_]:
        """Per frame: True when the expression matches it."""
        return np.asarray(self.keep(packets) != 0, np.bool_)


@checked(batch=(1, 1 << 20))
def filter_capture(packets: Iterable[CapturedPacket], expression: str, *,
                   engine: str = "auto", batch: int = 256) -> Iterator[CapturedPacket]:
    """The packets of a capture ``expression`` matches, in order (``tcpdump -r IN EXPR``),
    run through the filter ``batch`` at a time."""
    f = PacketFilter(expression, engine=engine)
    pending: list[CapturedPacket] = []

    def flush() -> Iterator[CapturedPacket]:
        keep = f.match([p.data for p in pending])
        yield from (p for p, k in zip(pending, keep, strict=True) if k)
        pending.clear()

    for i, pkt in enumerate(packets):
        if not isinstance(pkt, CapturedPacket):
            raise BadArgument(f"filter_capture: packets[{i}] must be a CapturedPacket, not "
                              f"{short(pkt)}")
        pending.append(pkt)
        if len(pending) == batch:
            yield from flush()
    if pending:
        yield from flush()
