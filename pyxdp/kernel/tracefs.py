"""The kernel's XDP tracepoints through tracefs (``kernel/trace/trace.c``, ``trace_events.c``).

The events are those of ``include/trace/events/xdp.h``; their definitions
(fields, print formats, record types) live in :mod:`pyxdp.uapi.xdp_trace`,
shared with pyxdp's userspace tracepoints (:mod:`pyxdp.net.trace`), so an
event read here is the same record the userspace datapath fires.

What this module does with tracefs:

* finds it (``/sys/kernel/tracing``, or the debugfs automount), and mounts it
  at ``/sys/kernel/tracing`` when it is not mounted (root only);
* parses ``events/xdp/<event>/format`` and compares it with pyxdp's
  definitions (:func:`check_definitions`): tracepoint fields are an ABI, a
  layout change must be noticed, not misparsed;
* :class:`TraceInstance` creates a private tracing instance
  (``instances/pyxdp-<pid>``), enables XDP events there only (never the
  global buffer's settings, which other tools own), reads its
  ``trace_pipe`` and parses each line into a
  :class:`~pyxdp.uapi.xdp_trace.TraceEvent`. Closing it (or the end of
  the process) removes the instance.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
import re
import select
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Final, Self

from pyxdp.errors import BPFUnavailable, KernelError, NotSupportedError
from pyxdp.uapi.xdp_trace import (
    DEFINITIONS,
    EventDef,
    EventFormat,
    TraceEvent,
    TraceRecord,
    format_differences,
    parse_format,
)

__all__ = [
    "TRACEFS",
    "TraceFormatMismatch",
    "TraceInstance",
    "TracefsError",
    "TracefsUnavailable",
    "check_definitions",
    "kernel_xdp_events",
    "parse_line",
    "read_format",
    "tracefs_root",
]

#: Where tracefs belongs (mounted there by pyxdp when missing).
TRACEFS: Final = "/sys/kernel/tracing"
_DEBUGFS_TRACING: Final = "/sys/kernel/debug/tracing"
SYSTEM: Final = "xdp"


class TracefsError(KernelError):
    """A tracefs operation failed (``errno`` kept)."""


class TracefsUnavailable(BPFUnavailable):
    """tracefs cannot be used here: not mounted and no right to mount it, or not in the kernel."""


class TraceFormatMismatch(NotSupportedError):
    """The running kernel's layout of an XDP event differs from pyxdp's definition."""

    def __init__(self, event: str, differences: list[str]) -> None:
        self.event = event
        self.differences = differences
        super().__init__(f"kernel tracepoint xdp:{event} differs from pyxdp's definition: "
                         + "; ".join(differences))


# --------------------------------------------------------------------------
# Finding and mounting tracefs
# --------------------------------------------------------------------------

def _mounted_tracefs() -> list[str]:
    try:
        with open("/proc/self/mounts") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "tracefs":
            # Mount points escape spaces as \040.
            points.append(parts[1].replace("\\040", " "))
    return points


def _sys_mount(target: str, fstype: str) -> int:
    """mount(2) of a pseudo filesystem; 0 or the errno."""
    libc = ctypes.CDLL(None, use_errno=True)
    ret = libc.mount(b"nodev", target.encode(), fstype.encode(), ctypes.c_ulong(0), None)
    return 0 if ret == 0 else ctypes.get_errno()


def _mount_tracefs() -> None:
    err = _sys_mount(TRACEFS, "tracefs")
    if err == 0:
        return
    if err == _errno.EBUSY and TRACEFS in _mounted_tracefs():  # mounted meanwhile
        return
    if err in (_errno.EPERM, _errno.EACCES):
        raise TracefsUnavailable(
            "mount tracefs", err,
            f"tracefs is not mounted at {TRACEFS} and mounting it needs root "
            f"(CAP_SYS_ADMIN); mount it with: mount -t tracefs nodev {TRACEFS}")
    if err == _errno.ENODEV:
        raise TracefsUnavailable("mount tracefs", err, "this kernel has no tracefs "
                                 "(CONFIG_TRACING is off)")
    raise TracefsUnavailable("mount tracefs", err, f"at {TRACEFS}")


def tracefs_root(mount: bool = True) -> str:
    """The directory of tracefs; mounts it at ``/sys/kernel/tracing`` if missing (``mount``).

    Raises :class:`TracefsUnavailable` when tracefs is not there and cannot
    be mounted (not root, or a kernel without tracing).
    """
    points = _mounted_tracefs()
    if TRACEFS in points:
        return TRACEFS
    for p in points:
        if os.path.isdir(os.path.join(p, "events")):
            return p
    if os.path.isdir(os.path.join(_DEBUGFS_TRACING, "events")):  # the debugfs automount
        return _DEBUGFS_TRACING
    if not mount:
        raise TracefsUnavailable("find tracefs", _errno.ENOENT,
                                 f"tracefs is not mounted (expected at {TRACEFS})")
    if not os.path.isdir(TRACEFS):
        raise TracefsUnavailable("find tracefs", _errno.ENOENT,
                                 f"{TRACEFS} does not exist: a kernel without tracing?")
    _mount_tracefs()
    return TRACEFS


# --------------------------------------------------------------------------
# Format files
# --------------------------------------------------------------------------

def _event_dir(root: str, event: str, system: str = SYSTEM) -> str:
    return os.path.join(root, "events", system, event)


def kernel_xdp_events(root: str | None = None) -> list[str]:
    """Names of the XDP events the running kernel defines, sorted."""
    base = os.path.join(root or tracefs_root(), "events", SYSTEM)
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        return []
    except PermissionError as e:
        raise TracefsUnavailable("read tracefs", e.errno or _errno.EACCES, base) from None
    return sorted(n for n in names if os.path.isfile(os.path.join(base, n, "format")))


def read_format(event: str, root: str | None = None, system: str = SYSTEM) -> EventFormat:
    """Parse ``events/<system>/<event>/format`` of the running kernel."""
    path = os.path.join(_event_dir(root or tracefs_root(), event, system), "format")
    try:
        with open(path) as f:
            return parse_format(f.read())
    except FileNotFoundError:
        raise TracefsError(f"read {system}:{event} format", _errno.ENOENT,
                           "no such tracepoint in this kernel") from None
    except PermissionError as e:
        raise TracefsUnavailable(f"read {system}:{event} format", e.errno or _errno.EACCES,
                                 path) from None


def check_definitions(root: str | None = None) -> dict[str, list[str]]:
    """Compare every XDP event of the kernel with pyxdp's definitions.

    Returns ``{event: [differences]}`` for the events that differ, including
    events only one side knows; an empty dict means the layouts agree.
    """
    root = root or tracefs_root()
    live = set(kernel_xdp_events(root))
    out: dict[str, list[str]] = {}
    for name in sorted(live | set(DEFINITIONS)):
        if name not in DEFINITIONS:
            out[name] = ["the kernel has this event; pyxdp does not define it"]
        elif name not in live:
            out[name] = ["pyxdp defines this event; the kernel does not have it"]
        else:
            diffs = format_differences(DEFINITIONS[name], read_format(name, root))
            if diffs:
                out[name] = diffs
    return out


def _parser_for(definition: EventDef, live: EventFormat) -> EventDef:
    """The definition to parse this kernel's lines with.

    The text follows the live print format; when it is not pyxdp's (an
    older or newer kernel) but prints only fields pyxdp knows, lines are
    parsed by it into pyxdp's record (fields it does not print stay 0).
    """
    if live.print_format is None or live.print_format == definition.print_format:
        return definition
    try:
        return EventDef(definition.name, definition.fields, live.print_format,
                        definition.record)
    except (ValueError, KeyError):
        return definition


# --------------------------------------------------------------------------
# trace_pipe lines
# --------------------------------------------------------------------------

# trace_print_context: "%16s-%-7d " comm-pid, an optional "(tgid) " column
# (record-tgid), "[%03d] " cpu, the irq-info flags when that option is on,
# (never starting with a digit: irqs-off comes first), then the timestamp,
# the event name and the body.
_LINE_RE: Final = re.compile(
    r"^\s*(?P<comm>.*)-(?P<pid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(?P<cpu>\d+)\]\s+"
    r"(?:(?P<flags>[^\s\d]\S*)\s+)?(?P<ts>\d+(?:\.\d+)?):\s"
    r"(?P<event>\w+):\s(?P<body>.*)$")
_LOST_RE: Final = re.compile(r"^CPU:(?P<cpu>\d+) \[LOST (?P<n>\d+) EVENTS\]$")


def _timestamp_ns(text: str) -> int:
    if "." not in text:  # counter-like trace clocks print a plain number
        return int(text)
    secs, frac = text.split(".", 1)
    return int(secs) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])


def parse_line(line: str, parsers: Mapping[str, EventDef] | None = None) -> TraceEvent | None:
    """A trace_pipe line as a :class:`TraceEvent`; ``None`` for lines of other events.

    Raises :class:`ValueError` for an XDP event whose body does not follow
    its format (a layout pyxdp does not know).
    """
    m = _LINE_RE.match(line.rstrip("\n"))
    if m is None:
        return None
    table = parsers if parsers is not None else DEFINITIONS
    definition = table.get(m["event"])
    if definition is None:
        return None
    record: TraceRecord = definition.parse(m["body"])  # type: ignore[assignment]
    return TraceEvent(m["event"], record, _timestamp_ns(m["ts"]), int(m["cpu"]),
                      int(m["pid"]), m["comm"].strip(), m["flags"] or "")


# --------------------------------------------------------------------------
# A private tracing instance
# --------------------------------------------------------------------------

def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except PermissionError as e:
        raise TracefsUnavailable("write tracefs", e.errno or _errno.EACCES, path) from None
    except OSError as e:
        raise TracefsError("write tracefs", e.errno or _errno.EIO,
                           f"{path} <- {text.strip()!r}") from None


def _remove_instance(path: str, fds: list[int]) -> None:
    # Runs at close(), garbage collection or interpreter exit: an instance
    # left behind keeps its per-CPU ring buffers allocated for good.
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != _errno.EBUSY:  # EBUSY: a reader is still finishing
                return
            time.sleep(0.02)


class TraceInstance:
    """``instances/pyxdp-<pid>``: XDP events enabled in a buffer of pyxdp's own.

    ``events`` are enabled at once (default: every XDP event both the kernel
    and pyxdp know). Each enabled event's live format is compared with
    pyxdp's definition; differences are kept in :attr:`mismatches`, or
    raised as :class:`TraceFormatMismatch` with ``strict``.
    ``buffer_size_kb`` sizes the instance's per-CPU buffers.

    :meth:`read` returns the events that arrived (waiting up to a timeout);
    :attr:`lost` counts events the kernel reported lost (buffer overrun),
    :attr:`unparsed` XDP lines whose body did not follow the format (the
    last one is kept in :attr:`last_unparsed`) rather than stopping a reader.
    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, events: Iterable[str] | None = None, *, name: str | None = None,
                 root: str | None = None, buffer_size_kb: int | None = None,
                 strict: bool = False) -> None:
        self.root = root or tracefs_root()
        self.strict = strict
        self.mismatches: dict[str, list[str]] = {}
        self.enabled: list[str] = []
        self.lost = 0
        self.unparsed = 0
        self.last_unparsed = ""
        self._parsers: dict[str, EventDef] = {}
        self._fds: list[int] = []
        self._pending = b""
        self.path = self._create(name)
        self._finalizer = weakref.finalize(self, _remove_instance, self.path, self._fds)
        try:
            # Wake readers on the first event, not when the buffer is half
            # full (buffer_percent is per instance; the default is 50).
            pct = os.path.join(self.path, "buffer_percent")
            if os.path.exists(pct):
                _write(pct, "0")
            if buffer_size_kb is not None:
                _write(os.path.join(self.path, "buffer_size_kb"), f"{int(buffer_size_kb)}\n")
            if events is None:
                live = set(kernel_xdp_events(self.root))
                events = [e for e in DEFINITIONS if e in live]
            for event in events:
                self.enable(event)
        except BaseException:
            self.close()
            raise

    def _create(self, name: str | None) -> str:
        base = os.path.join(self.root, "instances")
        stem = name or f"pyxdp-{os.getpid()}"
        for n in range(1, 1000):
            path = os.path.join(base, stem if n == 1 else f"{stem}-{n}")
            try:
                os.mkdir(path)
                return path
            except FileExistsError:
                if name is not None:
                    raise TracefsError("create tracefs instance", _errno.EEXIST, path) from None
            except PermissionError as e:
                raise TracefsUnavailable("create tracefs instance",
                                         e.errno or _errno.EACCES, path) from None
            except OSError as e:
                raise TracefsError("create tracefs instance", e.errno or _errno.EIO,
                                   path) from None
        raise TracefsError("create tracefs instance", _errno.EEXIST, f"{base}/{stem}-*")

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    # ---------------------------------------------------------------- events

    def enable(self, event: str) -> None:
        """Enable ``xdp:<event>`` in this instance (after checking its layout)."""
        if event not in DEFINITIONS:
            raise NotSupportedError(f"pyxdp does not define the XDP event {event!r}")
        if event in self.enabled:
            return
        live = read_format(event, self.root)
        diffs = format_differences(DEFINITIONS[event], live)
        if diffs:
            if self.strict:
                raise TraceFormatMismatch(event, diffs)
            self.mismatches[event] = diffs
        self._parsers[event] = _parser_for(DEFINITIONS[event], live)
        _write(os.path.join(_event_dir(self.path, event), "enable"), "1")
        self.enabled.append(event)

    def disable(self, event: str) -> None:
        if event in self.enabled:
            _write(os.path.join(_event_dir(self.path, event), "enable"), "0")
            self.enabled.remove(event)

    # ---------------------------------------------------------------- reading

    def _pipe(self) -> int:
        if self.closed:
            raise TracefsError("read trace_pipe", _errno.EBADF, "the instance is closed")
        if not self._fds:
            path = os.path.join(self.path, "trace_pipe")
            try:
                self._fds.append(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
            except OSError as e:
                raise TracefsError("open trace_pipe", e.errno or _errno.EIO, path) from None
        return self._fds[0]

    def _parse(self, data: bytes, out: list[TraceEvent]) -> None:
        data = self._pending + data
        *lines, self._pending = data.split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", errors="replace")
            lost = _LOST_RE.match(line)
            if lost:
                self.lost += int(lost["n"])
                continue
            try:
                ev = parse_line(line, self._parsers)
            except ValueError:
                self.unparsed += 1
                self.last_unparsed = line
                continue
            if ev is not None:
                out.append(ev)

    def read(self, timeout: float = 0.0) -> list[TraceEvent]:
        """Events now in the buffer; if none, wait up to ``timeout`` seconds for some.

        Reading consumes them (trace_pipe semantics).
        """
        fd = self._pipe()
        deadline = time.monotonic() + timeout
        out: list[TraceEvent] = []
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                chunk = b""
            except InterruptedError:
                continue
            now = time.monotonic()
            if chunk:
                self._parse(chunk, out)
                if now < deadline or not out:
                    continue  # drain what is there
                break
            if out or now >= deadline:
                break
            # Poll in short slices: a wakeup from the ring buffer is delivered
            # by irq_work and can come late; reading again is cheap.
            poller.poll(max(1, int(min(deadline - now, 0.1) * 1000)))
        return out

    def events(self, duration: float | None = None) -> Iterator[TraceEvent]:
        """Yield events as they arrive, for ``duration`` seconds (``None``: until closed)."""
        end = None if duration is None else time.monotonic() + duration
        while not self.closed:
            left = 0.2 if end is None else min(0.2, end - time.monotonic())
            if left <= 0:
                return
            yield from self.read(left)

    def __iter__(self) -> Iterator[TraceEvent]:
        return self.events()

    def overruns(self) -> int:
        """Events overwritten in this instance's buffers, summed over CPUs (``per_cpu/*/stats``)."""
        total = 0
        base = os.path.join(self.path, "per_cpu")
        try:
            cpus = os.listdir(base)
        except OSError:
            return 0
        for cpu in cpus:
            try:
                with open(os.path.join(base, cpu, "stats")) as f:
                    for line in f:
                        if line.startswith("overrun:"):
                            total += int(line.split(":", 1)[1])
            except (OSError, ValueError):
                continue
        return total

    # ---------------------------------------------------------------- lifetime

    def close(self) -> None:
        """Disable the events, close trace_pipe and remove the instance."""
        if self.closed:
            return
        for event in list(self.enabled):
            try:
                self.disable(event)
            except KernelError:
                pass  # removing the instance disables them anyway
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"events={self.enabled}"
        return f"TraceInstance({self.path!r}, {state})"
