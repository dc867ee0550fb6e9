"""The XDP tracepoints as the kernel defines them: ``include/trace/events/xdp.h``.

One definition per event, shared by both halves of pyxdp's tracing:
:mod:`pyxdp.net.trace` fires these events from the userspace datapath, and
:mod:`pyxdp.kernel.tracefs` reads the real kernel's events and parses them
into the very same records. This module is pure data and text handling (no
I/O), so both layers can import it.

For each event this holds:

* the fields of its ``TP_STRUCT__entry``, in order, with the C type, size,
  signedness and offset the kernel reports in
  ``/sys/kernel/tracing/events/xdp/<event>/format`` (LP64 layout, after the
  8-byte common header). Tracepoint fields are an ABI to monitoring tools,
  so a kernel test compares these against the live format files;
* the ``TP_printk`` format and its arguments (``REC->field``,
  ``__print_symbolic`` tables, ``__get_str``), from which the trace_pipe
  body is rendered and parsed back with C ``printf`` semantics (``%d`` of a
  ``u32`` prints it signed, an unknown symbolic value prints as ``0x%lx``,
  ``%p`` as 16 hex digits);
* a record type (a :class:`~typing.NamedTuple` with the fields in
  ``TP_STRUCT`` order).

Layout is that of Linux 6.18: ``xdp_cpumap_kthread`` has ``drops`` between
``cpu`` and ``processed``; ``xdp_redirect_map(_err)`` and
``mem_return_failed`` are gone; ``bpf_xdp_link_attach_failed`` exists.
Also here: :func:`parse_format` for the text of a tracefs ``format`` file
and :func:`format_differences` to compare it with a definition.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final, NamedTuple, cast

from pyxdp.errors import BadArgument

__all__ = [
    "ACTION_NAMES",
    "COMMON_FIELDS",
    "DEFINITIONS",
    "EVENT_NAMES",
    "MEM_TYPE_NAMES",
    "BpfXdpLinkAttachFailed",
    "EventDef",
    "EventFormat",
    "Field",
    "MemConnect",
    "MemDisconnect",
    "PrintArg",
    "PrintFormat",
    "TraceEvent",
    "TraceRecord",
    "XdpBulkTx",
    "XdpCpumapEnqueue",
    "XdpCpumapKthread",
    "XdpDevmapXmit",
    "XdpException",
    "XdpMemType",
    "XdpRedirect",
    "XdpRedirectErr",
    "action_name",
    "definition_of",
    "format_differences",
    "mem_type_name",
    "parse_format",
    "parse_print_fmt",
]

SYSTEM: Final = "xdp"

# --------------------------------------------------------------------------
# Symbol tables (the __print_symbolic tables of xdp.h)
# --------------------------------------------------------------------------

#: ``__XDP_ACT_MAP``: enum xdp_action values as the trace output names them.
ACTION_NAMES: Final[Mapping[int, str]] = {
    0: "ABORTED", 1: "DROP", 2: "PASS", 3: "TX", 4: "REDIRECT",
}


class XdpMemType(IntEnum):
    """``enum xdp_mem_type`` (include/net/xdp.h)."""

    MEM_TYPE_PAGE_SHARED = 0
    MEM_TYPE_PAGE_ORDER0 = 1
    MEM_TYPE_PAGE_POOL = 2
    MEM_TYPE_XSK_BUFF_POOL = 3


#: ``__MEM_TYPE_MAP``: the memory model names of the mem_* events.
MEM_TYPE_NAMES: Final[Mapping[int, str]] = {
    0: "PAGE_SHARED", 1: "PAGE_ORDER0", 2: "PAGE_POOL", 3: "XSK_BUFF_POOL",
}


def _symbolic(value: int, table: Mapping[int, str]) -> str:
    # trace_print_symbols_seq: a value missing from the table prints as
    # "0x%lx" of the (zero-extended unsigned long) value.
    name = table.get(value)
    return name if name is not None else f"0x{value & 0xFFFF_FFFF_FFFF_FFFF:x}"


def action_name(act: int) -> str:
    """``ABORTED``..``REDIRECT``; any other value in hex (``0x7``), as the kernel prints it."""
    return _symbolic(act, ACTION_NAMES)


def mem_type_name(mem_type: int) -> str:
    """``PAGE_SHARED``..``XSK_BUFF_POOL``; any other value in hex."""
    return _symbolic(mem_type, MEM_TYPE_NAMES)


# --------------------------------------------------------------------------
# Records: one NamedTuple per event, fields in TP_STRUCT order
# --------------------------------------------------------------------------

class XdpException(NamedTuple):
    """``xdp_exception``: an XDP_ABORTED, invalid action or failed XDP_TX."""

    prog_id: int
    act: int
    ifindex: int


class XdpBulkTx(NamedTuple):
    """``xdp_bulk_tx``: a driver flushed its XDP_TX bulk queue."""

    ifindex: int
    act: int
    drops: int
    sent: int
    err: int


class XdpRedirect(NamedTuple):
    """``xdp_redirect`` (class ``xdp_redirect_template``): a successful redirect."""

    prog_id: int
    act: int
    ifindex: int
    err: int
    to_ifindex: int
    map_id: int
    map_index: int


class XdpRedirectErr(NamedTuple):
    """``xdp_redirect_err`` (class ``xdp_redirect_template``): a failed redirect."""

    prog_id: int
    act: int
    ifindex: int
    err: int
    to_ifindex: int
    map_id: int
    map_index: int


class XdpCpumapKthread(NamedTuple):
    """``xdp_cpumap_kthread``: one run of a cpumap entry's kthread on its CPU."""

    map_id: int
    act: int
    cpu: int
    drops: int
    processed: int
    sched: int
    xdp_pass: int
    xdp_drop: int
    xdp_redirect: int


class XdpCpumapEnqueue(NamedTuple):
    """``xdp_cpumap_enqueue``: a bulk of frames queued from ``cpu`` to ``to_cpu``."""

    map_id: int
    act: int
    cpu: int
    drops: int
    processed: int
    to_cpu: int


class XdpDevmapXmit(NamedTuple):
    """``xdp_devmap_xmit``: a bulk handed to ``ndo_xdp_xmit`` of ``to_ifindex``."""

    from_ifindex: int
    act: int
    to_ifindex: int
    drops: int
    sent: int
    err: int


class MemDisconnect(NamedTuple):
    """``mem_disconnect``: a memory model (allocator) was unregistered."""

    xa: int
    mem_id: int
    mem_type: int
    allocator: int


class MemConnect(NamedTuple):
    """``mem_connect``: a memory model was registered for an rx queue."""

    xa: int
    mem_id: int
    mem_type: int
    allocator: int
    rxq: int
    ifindex: int


class BpfXdpLinkAttachFailed(NamedTuple):
    """``bpf_xdp_link_attach_failed``: the extack message of a failed XDP link create."""

    msg: str


TraceRecord = (XdpException | XdpBulkTx | XdpRedirect | XdpRedirectErr | XdpCpumapKthread
               | XdpCpumapEnqueue | XdpDevmapXmit | MemDisconnect | MemConnect
               | BpfXdpLinkAttachFailed)


# --------------------------------------------------------------------------
# Fields and print formats
# --------------------------------------------------------------------------

class Field(NamedTuple):
    """One ``field:`` line of a format file: C type, name, offset, size, signedness."""

    ctype: str
    name: str
    offset: int
    size: int
    signed: bool


class PrintArg(NamedTuple):
    """One argument of ``TP_printk``.

    ``kind`` is ``"val"`` (``REC->field``), ``"sym"`` (``__print_symbolic``
    over ``symbols``), ``"str"`` (``__get_str(field)``) or ``"expr"`` (any
    other expression, kept in ``text``; pyxdp cannot evaluate it).
    """

    field: str
    kind: str = "val"
    symbols: tuple[tuple[int, str], ...] = ()
    text: str = ""


class PrintFormat(NamedTuple):
    """``TP_printk``: the format string and its arguments."""

    fmt: str
    args: tuple[PrintArg, ...]


def _layout(specs: Sequence[tuple[str, str, int, bool]], start: int = 8) -> tuple[Field, ...]:
    # Offsets follow the C struct layout: each field aligned to its size
    # (all are scalars or pointers). The 8-byte common header comes first.
    out: list[Field] = []
    off = start
    for ctype, name, size, signed in specs:
        off = (off + size - 1) // size * size
        out.append(Field(ctype, name, off, size, signed))
        off += size
    return tuple(out)


#: ``struct trace_entry``: the header every event starts with.
COMMON_FIELDS: Final = _layout([
    ("unsigned short", "common_type", 2, False),
    ("unsigned char", "common_flags", 1, False),
    ("unsigned char", "common_preempt_count", 1, False),
    ("int", "common_pid", 4, True),
], start=0)

_INT = ("int", 4, True)
_U32 = ("u32", 4, False)
_UINT = ("unsigned int", 4, False)  # "unsigned" in xdp.h; tracefs spells it out


def _f(name: str, kind: tuple[str, int, bool]) -> tuple[str, str, int, bool]:
    return (kind[0], name, kind[1], kind[2])


def _ptr(ctype: str, name: str) -> tuple[str, str, int, bool]:
    return (ctype, name, 8, False)


_ACT_SYMBOLS: Final = tuple(sorted(ACTION_NAMES.items()))
_MEM_SYMBOLS: Final = tuple(sorted(MEM_TYPE_NAMES.items()))


def _val(name: str) -> PrintArg:
    return PrintArg(name)


def _act() -> PrintArg:
    return PrintArg("act", "sym", _ACT_SYMBOLS)


# A C printf conversion (the subset trace formats use): flags, width,
# precision, length modifier, conversion.
_CONV_RE: Final = re.compile(
    r"%(?P<flags>[-+ #0]*)(?P<width>\d+)?(?:\.(?P<prec>\d+))?"
    r"(?P<len>hh|h|ll|l|z|j|t)?(?P<conv>[diouxXcsp%])")

_MASK64: Final = 0xFFFF_FFFF_FFFF_FFFF


def _c_int(value: int, bits: int, signed: bool) -> int:
    value &= (1 << bits) - 1
    if signed and value >> (bits - 1):
        value -= 1 << bits
    return value


def _store(f: Field, value: int) -> int:
    # A parsed or fired value held as the field's C type would hold it
    # (a u32 printed with %d reads back as -1 and is stored as 4294967295).
    return _c_int(value, f.size * 8, f.signed)


_Render = Callable[[object], str]
_Parse = Callable[[str], object]


def _int_renderer(m: re.Match[str]) -> Callable[[int], str]:
    conv, length = m["conv"], m["len"] or ""
    bits = 64 if length in ("l", "ll", "z", "j", "t") else 32
    signed = conv in "di"
    pyconv = {"i": "d", "u": "d"}.get(conv, conv)
    spec = "%" + m["flags"] + (m["width"] or "") + (f".{m['prec']}" if m["prec"] else "") + pyconv
    if spec == "%d":  # the common case, without going through %-formatting
        return lambda v: str(_c_int(v, bits, signed))
    return lambda v: spec % _c_int(v, bits, signed)


def _int_pattern(conv: str) -> str:
    return {"d": r"-?\d+", "i": r"-?\d+", "u": r"\d+", "o": r"[0-7]+",
            "x": r"[0-9a-f]+", "X": r"[0-9A-F]+"}[conv]


def _int_base(conv: str) -> int:
    return {"o": 8, "x": 16, "X": 16}.get(conv, 10)


@dataclass(frozen=True, eq=False)
class EventDef:
    """One XDP tracepoint: its name, ``TP_STRUCT`` fields, ``TP_printk`` and record type.

    :meth:`render` produces the trace_pipe body (the text after
    ``"<name>: "``) exactly as the kernel's ``trace_raw_output_<name>``;
    :meth:`parse` turns such a body back into a record.
    """

    name: str
    fields: tuple[Field, ...]
    print_format: PrintFormat
    record: type[tuple[object, ...]]
    system: str = SYSTEM
    _renderers: tuple[tuple[str, int, Callable[[object], str]], ...] = field(
        init=False, repr=False)
    _tail: str = field(init=False, repr=False)
    _regex: re.Pattern[str] = field(init=False, repr=False)
    _readers: tuple[tuple[int, Callable[[str], object]], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        renderers, regex, readers = _compile(self.fields, self.print_format)
        parts = renderers[:-1]
        object.__setattr__(self, "_renderers", tuple(parts))
        object.__setattr__(self, "_tail", renderers[-1][0])
        object.__setattr__(self, "_regex", regex)
        object.__setattr__(self, "_readers", tuple(readers))

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def make(self, values: Iterable[object]) -> tuple[Any, ...]:
        """A record of this event from its field values, in TP_STRUCT order."""
        return cast(Callable[..., tuple[Any, ...]], self.record)(*values)

    def index(self, name: str) -> int:
        """Position of field ``name`` in the record."""
        return self.field_names.index(name)

    def render(self, record: Sequence[object]) -> str:
        """The trace_pipe body of ``record``, byte for byte as the kernel prints it."""
        return "".join([lit + conv(record[i]) for lit, i, conv in self._renderers]) + self._tail

    def parse(self, body: str) -> tuple[object, ...]:
        """A record from a trace_pipe body; fields the format does not print are 0.

        Raises :class:`ValueError` when ``body`` does not follow the format.
        """
        m = self._regex.fullmatch(body)
        if m is None:
            raise ValueError(f"{self.name}: body does not match {self.print_format.fmt!r}: "
                             f"{body!r}")
        values: list[object] = [0 if f.size and not f.ctype.startswith("__data_loc") else ""
                                for f in self.fields]
        for group, (index, read) in enumerate(self._readers, start=1):
            values[index] = read(m[group])
        return self.make(values)

    def normalize(self, record: Sequence[object]) -> tuple[object, ...]:
        """``record`` with every integer field wrapped to its C type."""
        return self.make([_store(f, v) if isinstance(v, int) else v
                          for f, v in zip(self.fields, record, strict=True)])


def _compile(fields: tuple[Field, ...], pf: PrintFormat) -> tuple[
        list[tuple[str, int, Callable[[object], str]]], re.Pattern[str],
        list[tuple[int, Callable[[str], object]]]]:
    """Renderers (literal, field index, converter) and a parser regex for a print format."""
    by_name = {f.name: (i, f) for i, f in enumerate(fields)}
    renderers: list[tuple[str, int, Callable[[object], str]]] = []
    pattern: list[str] = []
    readers: list[tuple[int, Callable[[str], object]]] = []
    args = iter(pf.args)
    literal = ""
    pos = 0
    for m in _CONV_RE.finditer(pf.fmt):
        literal += pf.fmt[pos:m.start()]
        pos = m.end()
        if m["conv"] == "%":
            literal += "%"
            continue
        arg = next(args, None)
        if arg is None or arg.field not in by_name:
            raise ValueError(f"print format argument {arg!r} names no field")
        index, f = by_name[arg.field]
        pattern.append(re.escape(literal))
        conv = m["conv"]
        render: Callable[[object], str]
        read: Callable[[str], object]
        if arg.kind == "sym":
            table = dict(arg.symbols)
            names = {v: k for k, v in table.items()}

            def render(v: object, table: dict[int, str] = table) -> str:
                return _symbolic(int(v), table)  # type: ignore[call-overload]

            def read(s: str, names: dict[str, int] = names, f: Field = f) -> object:
                return _store(f, names[s] if s in names else int(s, 16))
            pattern.append(r"(\w+)")
        elif arg.kind == "str" or conv == "s":
            def render(v: object) -> str:
                return "(null)" if v is None else str(v)

            def read(s: str) -> object:
                return s
            pattern.append(r"(.*)")
        elif conv == "p":
            # %p: a (normally hashed) pointer as 16 hex digits on 64-bit;
            # "(____ptrval____)" before the hash key is ready.
            def render(v: object) -> str:
                return f"{int(v) & _MASK64:016x}"  # type: ignore[call-overload]

            def read(s: str) -> object:
                return int(s, 16) if s[0] != "(" else 0
            pattern.append(r"([0-9a-f]+|\(_*ptrval_*\))")
        elif conv == "c":
            def render(v: object) -> str:
                return chr(int(v) & 0xFF)  # type: ignore[call-overload]

            def read(s: str, f: Field = f) -> object:
                return _store(f, ord(s))
            pattern.append(r"(.)")
        else:
            as_c = _int_renderer(m)

            def render(v: object, as_c: Callable[[int], str] = as_c) -> str:
                return as_c(int(v))  # type: ignore[call-overload]

            base = _int_base(conv)

            def read(s: str, f: Field = f, base: int = base) -> object:
                return _store(f, int(s.strip(), base))
            pattern.append(r"\s*(" + _int_pattern(conv) + ")")
        renderers.append((literal, index, render))
        readers.append((index, read))
        literal = ""
    literal += pf.fmt[pos:]
    pattern.append(re.escape(literal))
    renderers.append((literal, -1, str))
    return renderers, re.compile("".join(pattern), re.S), readers


def _def(name: str, record: type[tuple[object, ...]],
         specs: Sequence[tuple[str, str, int, bool]], fmt: str,
         args: Iterable[PrintArg]) -> EventDef:
    fields = _layout(specs)
    if tuple(f.name for f in fields) != tuple(record._fields):  # type: ignore[attr-defined]
        raise AssertionError(f"{name}: record fields differ from the field list")
    return EventDef(name, fields, PrintFormat(fmt, tuple(args)), record)


_REDIRECT_FIELDS: Final = [
    _f("prog_id", _INT), _f("act", _U32), _f("ifindex", _INT), _f("err", _INT),
    _f("to_ifindex", _INT), _f("map_id", _U32), _f("map_index", _INT),
]
_REDIRECT_FMT: Final = ("prog_id=%d action=%s ifindex=%d to_ifindex=%d err=%d "
                        "map_id=%d map_index=%d")
_REDIRECT_ARGS: Final = [_val("prog_id"), _act(), _val("ifindex"), _val("to_ifindex"),
                         _val("err"), _val("map_id"), _val("map_index")]
_MEM_FIELDS: Final = [
    _ptr("const struct xdp_mem_allocator *", "xa"), _f("mem_id", _U32),
    _f("mem_type", _U32), _ptr("const void *", "allocator"),
]

#: Every XDP tracepoint of Linux 6.18, by name.
DEFINITIONS: Final[Mapping[str, EventDef]] = {d.name: d for d in (
    _def("xdp_exception", XdpException,
         [_f("prog_id", _INT), _f("act", _U32), _f("ifindex", _INT)],
         "prog_id=%d action=%s ifindex=%d",
         [_val("prog_id"), _act(), _val("ifindex")]),
    _def("xdp_bulk_tx", XdpBulkTx,
         [_f("ifindex", _INT), _f("act", _U32), _f("drops", _INT), _f("sent", _INT),
          _f("err", _INT)],
         "ifindex=%d action=%s sent=%d drops=%d err=%d",
         [_val("ifindex"), _act(), _val("sent"), _val("drops"), _val("err")]),
    _def("xdp_redirect", XdpRedirect, _REDIRECT_FIELDS, _REDIRECT_FMT, _REDIRECT_ARGS),
    _def("xdp_redirect_err", XdpRedirectErr, _REDIRECT_FIELDS, _REDIRECT_FMT, _REDIRECT_ARGS),
    _def("xdp_cpumap_kthread", XdpCpumapKthread,
         [_f("map_id", _INT), _f("act", _U32), _f("cpu", _INT), _f("drops", _UINT),
          _f("processed", _UINT), _f("sched", _INT), _f("xdp_pass", _UINT),
          _f("xdp_drop", _UINT), _f("xdp_redirect", _UINT)],
         "kthread cpu=%d map_id=%d action=%s processed=%u drops=%u sched=%d "
         "xdp_pass=%u xdp_drop=%u xdp_redirect=%u",
         [_val("cpu"), _val("map_id"), _act(), _val("processed"), _val("drops"),
          _val("sched"), _val("xdp_pass"), _val("xdp_drop"), _val("xdp_redirect")]),
    _def("xdp_cpumap_enqueue", XdpCpumapEnqueue,
         [_f("map_id", _INT), _f("act", _U32), _f("cpu", _INT), _f("drops", _UINT),
          _f("processed", _UINT), _f("to_cpu", _INT)],
         "enqueue cpu=%d map_id=%d action=%s processed=%u drops=%u to_cpu=%d",
         [_val("cpu"), _val("map_id"), _act(), _val("processed"), _val("drops"),
          _val("to_cpu")]),
    _def("xdp_devmap_xmit", XdpDevmapXmit,
         [_f("from_ifindex", _INT), _f("act", _U32), _f("to_ifindex", _INT),
          _f("drops", _INT), _f("sent", _INT), _f("err", _INT)],
         "ndo_xdp_xmit from_ifindex=%d to_ifindex=%d action=%s sent=%d drops=%d err=%d",
         [_val("from_ifindex"), _val("to_ifindex"), _act(), _val("sent"), _val("drops"),
          _val("err")]),
    _def("mem_disconnect", MemDisconnect, _MEM_FIELDS,
         "mem_id=%d mem_type=%s allocator=%p",
         [_val("mem_id"), PrintArg("mem_type", "sym", _MEM_SYMBOLS), _val("allocator")]),
    _def("mem_connect", MemConnect,
         [*_MEM_FIELDS, _ptr("const struct xdp_rxq_info *", "rxq"), _f("ifindex", _INT)],
         "mem_id=%d mem_type=%s allocator=%p ifindex=%d",
         [_val("mem_id"), PrintArg("mem_type", "sym", _MEM_SYMBOLS), _val("allocator"),
          _val("ifindex")]),
    _def("bpf_xdp_link_attach_failed", BpfXdpLinkAttachFailed,
         [("__data_loc char[]", "msg", 4, False)],
         "errmsg=%s", [PrintArg("msg", "str")]),
)}

#: Event names in the order of the definitions.
EVENT_NAMES: Final = tuple(DEFINITIONS)

_BY_RECORD: Final[Mapping[type, EventDef]] = {d.record: d for d in DEFINITIONS.values()}


def definition_of(record: object) -> EventDef:
    """The :class:`EventDef` of a record (by its type)."""
    try:
        return _BY_RECORD[type(record)]
    except KeyError:
        raise BadArgument(f"not an XDP trace record: {type(record).__name__}") from None


# --------------------------------------------------------------------------
# An event as seen on trace_pipe: the record and the context the kernel adds
# --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One fired event: its record plus the trace_pipe context columns.

    ``timestamp_ns`` is the trace clock (kernel: the instance's clock;
    userspace: ``time.monotonic_ns``), ``flags`` the irq-info column
    (``"b...1"``; ``"....."`` for userspace events).
    """

    name: str
    record: TraceRecord
    timestamp_ns: int = 0
    cpu: int = 0
    pid: int = 0
    comm: str = ""
    flags: str = "....."

    @property
    def text(self) -> str:
        """The body: what trace_pipe prints after ``"<name>: "``."""
        return DEFINITIONS[self.name].render(self.record)

    def line(self) -> str:
        """The whole trace_pipe line, laid out as ``trace_print_context`` does."""
        secs, nsec = divmod(self.timestamp_ns, 1_000_000_000)
        return (f"{self.comm:>16}-{self.pid:<7} [{self.cpu:03d}] {self.flags} "
                f"{secs:5d}.{nsec // 1000:06d}: {self.name}: {self.text}")


# --------------------------------------------------------------------------
# tracefs format files
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class EventFormat:
    """A parsed ``events/<system>/<event>/format`` file."""

    name: str
    id: int
    common_fields: tuple[Field, ...]
    fields: tuple[Field, ...]
    print_fmt: str
    print_format: PrintFormat | None


_FIELD_RE: Final = re.compile(
    r"\s*field:(?P<decl>[^;]*);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);"
    r"\s*signed:(?P<signed>\d+);")


def _split_decl(decl: str) -> tuple[str, str]:
    # "const struct xdp_mem_allocator * xa" -> type, name; arrays keep "[]"
    # on the type ("__data_loc char[] msg", "char comm[16]" -> "char[16]").
    decl = decl.strip()
    m = re.fullmatch(r"(?P<type>.*?)\s*\b(?P<name>\w+)\s*(?P<dim>\[\d*\])?", decl)
    if m is None:
        raise ValueError(f"unparsable field declaration {decl!r}")
    ctype = m["type"].strip() + (m["dim"] or "")
    return ctype, m["name"]


def parse_format(text: str) -> EventFormat:
    """Parse the text of a tracefs ``format`` file.

    Raises :class:`ValueError` on text that is not a format file.
    """
    name, ident = "", -1
    common: list[Field] = []
    own: list[Field] = []
    seen_blank = False
    print_fmt = ""
    in_format = False
    for line in text.splitlines():
        if line.startswith("name:"):
            name = line[5:].strip()
        elif line.startswith("ID:"):
            ident = int(line[3:].strip())
        elif line.startswith("format:"):
            in_format = True
        elif line.startswith("print fmt:"):
            print_fmt = line[len("print fmt:"):].strip()
            in_format = False
        elif in_format:
            if not line.strip():
                seen_blank = True
                continue
            m = _FIELD_RE.match(line)
            if m is None:
                raise ValueError(f"unparsable format line {line!r}")
            ctype, fname = _split_decl(m["decl"])
            f = Field(ctype, fname, int(m["off"]), int(m["size"]), m["signed"] == "1")
            # The common fields come first, then a blank line, then the event's own.
            (own if seen_blank or not fname.startswith("common_") else common).append(f)
    if not name:
        raise ValueError("not a tracefs format file: no 'name:' line")
    try:
        pf: PrintFormat | None = parse_print_fmt(print_fmt) if print_fmt else None
    except ValueError:
        pf = None
    return EventFormat(name, ident, tuple(common), tuple(own), print_fmt, pf)


def _c_string(text: str) -> tuple[str, str]:
    """The C string literal at the start of ``text`` (decoded) and the rest."""
    if not text.startswith('"'):
        raise ValueError(f"print fmt does not start with a string: {text[:40]!r}")
    out: list[str] = []
    i = 1
    escapes = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "\r"}
    while i < len(text):
        c = text[i]
        if c == '"':
            return "".join(out), text[i + 1:]
        if c == "\\" and i + 1 < len(text):
            out.append(escapes.get(text[i + 1], text[i + 1]))
            i += 2
            continue
        out.append(c)
        i += 1
    raise ValueError("unterminated string in print fmt")


def _split_args(text: str) -> list[str]:
    # Split at top-level commas: not inside (), {} or string literals.
    args: list[str] = []
    depth, start, i, quoted = 0, 0, 0, False
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    tail = text[start:].strip()
    if tail:
        args.append(tail)
    return args


_SYM_PAIR_RE: Final = re.compile(r"\{\s*(-?\w+)\s*,\s*(\"(?:[^\"\\]|\\.)*\"|[^}]*?)\s*\}")


def _print_arg(expr: str) -> PrintArg:
    m = re.fullmatch(r"REC->(\w+)", expr)
    if m:
        return PrintArg(m[1])
    m = re.fullmatch(r"__print_symbolic\(\s*REC->(\w+)\s*,(.*)\)", expr, re.S)
    if m:
        pairs: list[tuple[int, str]] = []
        for value, name in _SYM_PAIR_RE.findall(m[2]):
            if name.startswith('"'):  # { -1, 0 } / { -1, NULL } ends the table
                pairs.append((int(value, 0), _c_string(name)[0]))
        return PrintArg(m[1], "sym", tuple(pairs))
    m = re.fullmatch(r"__get_str\(\s*(\w+)\s*\)", expr)
    if m:
        return PrintArg(m[1], "str")
    return PrintArg("", "expr", text=expr)


def parse_print_fmt(text: str) -> PrintFormat:
    """Parse the ``print fmt:`` line of a format file (without the ``print fmt:`` prefix)."""
    fmt, rest = _c_string(text.strip())
    rest = rest.strip()
    if rest.startswith(","):
        rest = rest[1:]
    return PrintFormat(fmt, tuple(_print_arg(a) for a in _split_args(rest)))


def format_differences(definition: EventDef, live: EventFormat) -> list[str]:
    """What differs between pyxdp's definition and a live format file (empty: identical).

    Compares the common header, every field (name, order, C type, offset,
    size, signedness) and the print format with its symbol tables.
    """
    out: list[str] = []
    if live.name != definition.name:
        out.append(f"name {live.name!r} != {definition.name!r}")
    if live.common_fields != COMMON_FIELDS:
        out.append(f"common header {live.common_fields} != {COMMON_FIELDS}")
    ours, theirs = definition.fields, live.fields
    if [f.name for f in ours] != [f.name for f in theirs]:
        out.append(f"fields {[f.name for f in theirs]} != pyxdp's {[f.name for f in ours]}")
    else:
        for a, b in zip(ours, theirs, strict=True):
            if a != b:
                out.append(f"field {a.name}: kernel {tuple(b)} != pyxdp {tuple(a)}")
    if live.print_format is None:
        out.append(f"print fmt not understood: {live.print_fmt!r}")
    elif live.print_format != definition.print_format:
        if live.print_format.fmt != definition.print_format.fmt:
            out.append(f"print fmt {live.print_format.fmt!r} != "
                       f"{definition.print_format.fmt!r}")
        if live.print_format.args != definition.print_format.args:
            out.append(f"print args {live.print_format.args} != "
                       f"{definition.print_format.args}")
    return out
