"""The XDP tracepoints: definitions, kernel-exact text, counters, batch firing, listeners, rates.

Lines and format texts quoted here were read from the Linux 6.18 kernel of
the development machine (tracefs ``events/xdp/*/format`` and trace_pipe);
tests/kernel/test_tracefs.py checks the same things against the live kernel.
"""

from __future__ import annotations

import errno
import io
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

from pyxdp.cli.main import main
from pyxdp.cli.monitor import rows, run
from pyxdp.errors import BPFUnavailable, NotSupportedError
from pyxdp.kernel import tracefs
from pyxdp.kernel.tracefs import TracefsUnavailable, parse_line
from pyxdp.net import trace
from pyxdp.net.trace import Interval, Snapshot, Tracer, TraceSession, redirect_target
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.uapi.xdp_trace import (
    ACTION_NAMES,
    COMMON_FIELDS,
    DEFINITIONS,
    EVENT_NAMES,
    MEM_TYPE_NAMES,
    BpfXdpLinkAttachFailed,
    Field,
    MemConnect,
    MemDisconnect,
    PrintArg,
    TraceEvent,
    XdpBulkTx,
    XdpCpumapEnqueue,
    XdpCpumapKthread,
    XdpDevmapXmit,
    XdpException,
    XdpRedirect,
    XdpRedirectErr,
    action_name,
    definition_of,
    format_differences,
    mem_type_name,
    parse_format,
    parse_print_fmt,
)

# --------------------------------------------------------------------------- kernel texts

# events/xdp/xdp_cpumap_kthread/format on Linux 6.18 (the layout with "drops").
KTHREAD_FORMAT = """\
name: xdp_cpumap_kthread
ID: 580
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int map_id;\toffset:8;\tsize:4;\tsigned:1;
\tfield:u32 act;\toffset:12;\tsize:4;\tsigned:0;
\tfield:int cpu;\toffset:16;\tsize:4;\tsigned:1;
\tfield:unsigned int drops;\toffset:20;\tsize:4;\tsigned:0;
\tfield:unsigned int processed;\toffset:24;\tsize:4;\tsigned:0;
\tfield:int sched;\toffset:28;\tsize:4;\tsigned:1;
\tfield:unsigned int xdp_pass;\toffset:32;\tsize:4;\tsigned:0;
\tfield:unsigned int xdp_drop;\toffset:36;\tsize:4;\tsigned:0;
\tfield:unsigned int xdp_redirect;\toffset:40;\tsize:4;\tsigned:0;

print fmt: "kthread cpu=%d map_id=%d action=%s processed=%u drops=%u sched=%d \
xdp_pass=%u xdp_drop=%u xdp_redirect=%u", REC->cpu, REC->map_id, \
__print_symbolic(REC->act, { 0, "ABORTED" }, { 1, "DROP" }, { 2, "PASS" }, { 3, "TX" }, \
{ 4, "REDIRECT" }, { -1, ((void *)0) }), REC->processed, REC->drops, REC->sched, \
REC->xdp_pass, REC->xdp_drop, REC->xdp_redirect
"""

# The layout of the cpumap bulking patch (the seed-3 discussion): "drops"
# gone from xdp_cpumap_kthread. A monitor must notice, not misparse.
KTHREAD_FORMAT_NO_DROPS = (
    KTHREAD_FORMAT
    .replace("\tfield:unsigned int drops;\toffset:20;\tsize:4;\tsigned:0;\n", "")
    .replace("offset:24;\tsize:4;\tsigned:0;", "offset:20;\tsize:4;\tsigned:0;")
    .replace(" drops=%u", "").replace(" REC->drops,", ""))

MEM_CONNECT_PRINT = (
    '"mem_id=%d mem_type=%s allocator=%p ifindex=%d", REC->mem_id, '
    '__print_symbolic(REC->mem_type, { 0, "PAGE_SHARED" }, { 1, "PAGE_ORDER0" }, '
    '{ 2, "PAGE_POOL" }, { 3, "XSK_BUFF_POOL" }, { -1, 0 }), REC->allocator, REC->ifindex')

# trace_pipe lines read from the kernel.
KERNEL_LINES = [
    "          python-1770    [001] b...1  3232.640146: xdp_redirect_err: prog_id=46509 "
    "action=REDIRECT ifindex=1 to_ifindex=9999 err=-22 map_id=2147483647 map_index=0",
    "          python-1770    [001] .....  3232.612195: mem_disconnect: mem_id=12 "
    "mem_type=PAGE_POOL allocator=0000000096e39835",
    "          python-4204    [000] ..s11  3345.312982: xdp_exception: prog_id=47849 "
    "action=ABORTED ifindex=1",
    "          python-4204    [000] ..s11  3345.344408: xdp_exception: prog_id=47852 "
    "action=0x7 ifindex=1",
    "          python-9288    [001] b...1  3741.231995: xdp_redirect: prog_id=58689 "
    "action=REDIRECT ifindex=1 to_ifindex=3 err=0 map_id=2147483647 map_index=0",
    "          python-9288    [001] b...1  3741.232001: xdp_devmap_xmit: ndo_xdp_xmit "
    "from_ifindex=1 to_ifindex=3 action=REDIRECT sent=4 drops=0 err=0",
    "          python-9288    [001] ..s11  3741.232005: xdp_bulk_tx: ifindex=2 action=TX "
    "sent=4 drops=0 err=0",
    "     kworker/1:0-12649   [001] ..s1.  3741.195931: xdp_bulk_tx: ifindex=2 action=TX "
    "sent=0 drops=1 err=-6",
    "          python-9288    [001] b...1  3741.255989: xdp_cpumap_enqueue: enqueue cpu=1 "
    "map_id=24588 action=REDIRECT processed=5 drops=0 to_cpu=0",
    " cpumap/0/map:24-9290    [000] b....  3741.256013: xdp_cpumap_kthread: kthread cpu=0 "
    "map_id=24588 action=REDIRECT processed=5 drops=0 sched=1 xdp_pass=0 xdp_drop=0 "
    "xdp_redirect=0",
]


def body(line: str) -> tuple[str, str]:
    head, _, text = line.partition(": ")[2].partition(": ")
    return head, text


# --------------------------------------------------------------------------- definitions

def test_the_6_18_event_set() -> None:
    assert set(EVENT_NAMES) == {
        "xdp_exception", "xdp_bulk_tx", "xdp_redirect", "xdp_redirect_err",
        "xdp_cpumap_kthread", "xdp_cpumap_enqueue", "xdp_devmap_xmit", "mem_connect",
        "mem_disconnect", "bpf_xdp_link_attach_failed"}
    # Gone from 6.18: they must not be modelled as if they fired.
    for gone in ("xdp_redirect_map", "xdp_redirect_map_err", "mem_return_failed"):
        assert gone not in DEFINITIONS


@pytest.mark.parametrize("name, fields", [
    ("xdp_exception", [("int", "prog_id"), ("u32", "act"), ("int", "ifindex")]),
    ("xdp_bulk_tx", [("int", "ifindex"), ("u32", "act"), ("int", "drops"), ("int", "sent"),
                     ("int", "err")]),
    ("xdp_redirect", [("int", "prog_id"), ("u32", "act"), ("int", "ifindex"), ("int", "err"),
                      ("int", "to_ifindex"), ("u32", "map_id"), ("int", "map_index")]),
    ("xdp_cpumap_kthread", [("int", "map_id"), ("u32", "act"), ("int", "cpu"),
                            ("unsigned int", "drops"), ("unsigned int", "processed"),
                            ("int", "sched"), ("unsigned int", "xdp_pass"),
                            ("unsigned int", "xdp_drop"), ("unsigned int", "xdp_redirect")]),
    ("xdp_cpumap_enqueue", [("int", "map_id"), ("u32", "act"), ("int", "cpu"),
                            ("unsigned int", "drops"), ("unsigned int", "processed"),
                            ("int", "to_cpu")]),
    ("xdp_devmap_xmit", [("int", "from_ifindex"), ("u32", "act"), ("int", "to_ifindex"),
                         ("int", "drops"), ("int", "sent"), ("int", "err")]),
    ("mem_disconnect", [("const struct xdp_mem_allocator *", "xa"), ("u32", "mem_id"),
                        ("u32", "mem_type"), ("const void *", "allocator")]),
    ("mem_connect", [("const struct xdp_mem_allocator *", "xa"), ("u32", "mem_id"),
                     ("u32", "mem_type"), ("const void *", "allocator"),
                     ("const struct xdp_rxq_info *", "rxq"), ("int", "ifindex")]),
    ("bpf_xdp_link_attach_failed", [("__data_loc char[]", "msg")]),
])
def test_fields_in_tp_struct_order(name: str, fields: list[tuple[str, str]]) -> None:
    d = DEFINITIONS[name]
    assert [(f.ctype, f.name) for f in d.fields] == fields
    assert d.field_names == d.record._fields  # type: ignore[attr-defined]


def test_offsets_follow_the_common_header() -> None:
    assert [(f.name, f.offset, f.size) for f in COMMON_FIELDS] == [
        ("common_type", 0, 2), ("common_flags", 2, 1), ("common_preempt_count", 3, 1),
        ("common_pid", 4, 4)]
    assert [f.offset for f in DEFINITIONS["xdp_cpumap_kthread"].fields] == list(
        range(8, 44, 4))
    # Pointers are 8-byte aligned: mem_connect's int ifindex follows rxq at 32.
    assert [(f.name, f.offset) for f in DEFINITIONS["mem_connect"].fields] == [
        ("xa", 8), ("mem_id", 16), ("mem_type", 20), ("allocator", 24), ("rxq", 32),
        ("ifindex", 40)]


@pytest.mark.parametrize("name, fmt", [
    ("xdp_exception", "prog_id=%d action=%s ifindex=%d"),
    ("xdp_bulk_tx", "ifindex=%d action=%s sent=%d drops=%d err=%d"),
    ("xdp_redirect", "prog_id=%d action=%s ifindex=%d to_ifindex=%d err=%d map_id=%d "
                     "map_index=%d"),
    ("xdp_redirect_err", "prog_id=%d action=%s ifindex=%d to_ifindex=%d err=%d map_id=%d "
                         "map_index=%d"),
    ("xdp_cpumap_kthread", "kthread cpu=%d map_id=%d action=%s processed=%u drops=%u "
                           "sched=%d xdp_pass=%u xdp_drop=%u xdp_redirect=%u"),
    ("xdp_cpumap_enqueue", "enqueue cpu=%d map_id=%d action=%s processed=%u drops=%u "
                           "to_cpu=%d"),
    ("xdp_devmap_xmit", "ndo_xdp_xmit from_ifindex=%d to_ifindex=%d action=%s sent=%d "
                        "drops=%d err=%d"),
    ("mem_disconnect", "mem_id=%d mem_type=%s allocator=%p"),
    ("mem_connect", "mem_id=%d mem_type=%s allocator=%p ifindex=%d"),
    ("bpf_xdp_link_attach_failed", "errmsg=%s"),
])
def test_tp_printk_formats(name: str, fmt: str) -> None:
    assert DEFINITIONS[name].print_format.fmt == fmt


def test_symbol_tables() -> None:
    assert ACTION_NAMES == {0: "ABORTED", 1: "DROP", 2: "PASS", 3: "TX", 4: "REDIRECT"}
    assert [action_name(a) for a in range(6)] == [
        "ABORTED", "DROP", "PASS", "TX", "REDIRECT", "0x5"]
    assert action_name(0xFFFFFFFF) == "0xffffffff"
    assert MEM_TYPE_NAMES == {0: "PAGE_SHARED", 1: "PAGE_ORDER0", 2: "PAGE_POOL",
                              3: "XSK_BUFF_POOL"}
    assert mem_type_name(2) == "PAGE_POOL" and mem_type_name(9) == "0x9"


# --------------------------------------------------------------------------- format files

def test_parse_format_file() -> None:
    fmt = parse_format(KTHREAD_FORMAT)
    assert fmt.name == "xdp_cpumap_kthread" and fmt.id == 580
    assert fmt.common_fields == COMMON_FIELDS
    assert fmt.fields == DEFINITIONS["xdp_cpumap_kthread"].fields
    assert fmt.print_format == DEFINITIONS["xdp_cpumap_kthread"].print_format
    assert format_differences(DEFINITIONS["xdp_cpumap_kthread"], fmt) == []


def test_a_changed_layout_is_reported() -> None:
    old = parse_format(KTHREAD_FORMAT_NO_DROPS)
    diffs = format_differences(DEFINITIONS["xdp_cpumap_kthread"], old)
    assert any("fields" in d and "drops" in d for d in diffs)
    assert any("print fmt" in d for d in diffs)


def test_parse_print_fmt_symbolic_with_zero_terminator() -> None:
    pf = parse_print_fmt(MEM_CONNECT_PRINT)
    assert pf == DEFINITIONS["mem_connect"].print_format
    assert pf.args[1] == PrintArg("mem_type", "sym", tuple(sorted(MEM_TYPE_NAMES.items())))
    odd = parse_print_fmt('"x=%d", REC->a + 1')
    assert odd.args == (PrintArg("", "expr", text="REC->a + 1"),)


def test_field_declarations_with_pointers_and_arrays() -> None:
    text = ("name: t\nID: 1\nformat:\n"
            "\tfield:const struct xdp_rxq_info * rxq;\toffset:8;\tsize:8;\tsigned:0;\n"
            "\tfield:char comm[16];\toffset:16;\tsize:16;\tsigned:0;\n\n"
            'print fmt: "%d", REC->x\n')
    fmt = parse_format(text)
    assert fmt.common_fields == ()
    assert fmt.fields == (Field("const struct xdp_rxq_info *", "rxq", 8, 8, False),
                          Field("char[16]", "comm", 16, 16, False))
    with pytest.raises(ValueError):
        parse_format("no format here")


# --------------------------------------------------------------------------- text

@pytest.mark.parametrize("line", KERNEL_LINES)
def test_kernel_lines_parse_and_render_byte_exact(line: str) -> None:
    name, text = body(line)
    d = DEFINITIONS[name]
    record = d.parse(text)
    assert type(record) is d.record
    assert d.render(record) == text
    ev = parse_line(line)
    assert ev is not None and ev.name == name and ev.record == record
    assert ev.line() == line  # trace_print_context's layout, column for column


def test_render_known_records() -> None:
    D = DEFINITIONS
    assert D["xdp_exception"].render(XdpException(5, 0, 3)) == \
        "prog_id=5 action=ABORTED ifindex=3"
    assert D["xdp_exception"].render(XdpException(5, 7, 3)) == "prog_id=5 action=0x7 ifindex=3"
    # u32 map_id is printed with %d: the kernel shows values >= 2**31 negative.
    assert D["xdp_redirect"].render(XdpRedirect(1, 4, 2, 0, 0, 0xFFFFFFFF, 5)) == (
        "prog_id=1 action=REDIRECT ifindex=2 to_ifindex=0 err=0 map_id=-1 map_index=5")
    assert D["xdp_bulk_tx"].render(XdpBulkTx(4, 3, drops=2, sent=14, err=-6)) == (
        "ifindex=4 action=TX sent=14 drops=2 err=-6")
    assert D["xdp_cpumap_kthread"].render(XdpCpumapKthread(9, 4, 2, 1, 8, 1, 6, 1, 1)) == (
        "kthread cpu=2 map_id=9 action=REDIRECT processed=8 drops=1 sched=1 xdp_pass=6 "
        "xdp_drop=1 xdp_redirect=1")
    # %u of an unsigned field never shows a sign.
    assert D["xdp_cpumap_enqueue"].render(XdpCpumapEnqueue(9, 4, 0, -1, 3, 1)) == (
        "enqueue cpu=0 map_id=9 action=REDIRECT processed=3 drops=4294967295 to_cpu=1")
    assert D["xdp_devmap_xmit"].render(XdpDevmapXmit(1, 4, 3, 0, 16, 0)) == (
        "ndo_xdp_xmit from_ifindex=1 to_ifindex=3 action=REDIRECT sent=16 drops=0 err=0")
    assert D["mem_connect"].render(MemConnect(0, 3, 2, 0xABC, 0, 7)) == (
        "mem_id=3 mem_type=PAGE_POOL allocator=0000000000000abc ifindex=7")
    assert D["mem_disconnect"].render(MemDisconnect(0, 3, 5, 0)) == (
        "mem_id=3 mem_type=0x5 allocator=0000000000000000")
    assert D["bpf_xdp_link_attach_failed"].render(
        BpfXdpLinkAttachFailed("Invalid XDP flags for BPF link attachment")) == (
        "errmsg=Invalid XDP flags for BPF link attachment")


def test_parse_stores_c_types() -> None:
    d = DEFINITIONS["xdp_redirect"]
    rec = d.parse("prog_id=1 action=REDIRECT ifindex=2 to_ifindex=0 err=0 map_id=-1 "
                  "map_index=5")
    assert rec == XdpRedirect(1, 4, 2, 0, 0, 0xFFFFFFFF, 5)
    assert DEFINITIONS["xdp_exception"].parse("prog_id=1 action=0x7 ifindex=2").act == 7
    with pytest.raises(ValueError):
        d.parse("prog_id=1 action=REDIRECT")
    # Fields the format does not print (mem_* pointers) read back as 0.
    mc = DEFINITIONS["mem_connect"].parse(
        "mem_id=3 mem_type=PAGE_POOL allocator=(____ptrval____) ifindex=7")
    assert mc == MemConnect(0, 3, 2, 0, 0, 7)


def test_round_trip_every_event() -> None:
    rng = np.random.default_rng(7)
    for name, d in DEFINITIONS.items():
        for _ in range(50):
            values: list[object] = []
            for f in d.fields:
                if f.ctype.startswith("__data_loc"):
                    values.append("msg with spaces: and=signs")
                elif f.name in ("act", "mem_type"):
                    values.append(int(rng.integers(0, 8)))
                elif "*" in f.ctype:
                    values.append(int(rng.integers(0, 2**63)))
                else:
                    values.append(int(rng.integers(-(2**31), 2**32)))
            rec = d.normalize(values)
            back = d.parse(d.render(rec))
            # Pointers that are not printed come back 0; printed ones round trip.
            printed = {a.field for a in d.print_format.args}
            for f, a, b in zip(d.fields, rec, back, strict=True):
                assert b == (a if f.name in printed else 0), (name, f.name)


def test_parse_line_context_columns() -> None:
    line = ("  <idle>-0       (-------) [003] d.s2. 12.000001: xdp_exception: prog_id=1 "
            "action=DROP ifindex=2")
    ev = parse_line(line)
    assert ev is not None
    assert (ev.comm, ev.pid, ev.cpu, ev.flags, ev.timestamp_ns) == (
        "<idle>", 0, 3, "d.s2.", 12_000_001_000)
    # irq-info off: no flags column.
    ev = parse_line("     my-task-name-42    [000]    77.5: xdp_exception: prog_id=1 "
                    "action=PASS ifindex=2")
    assert ev is not None and (ev.comm, ev.pid, ev.flags) == ("my-task-name", 42, "")
    # Other events, headers and LOST markers are not XDP records.
    assert parse_line("          bash-1 [000] ..... 1.000000: sched_switch: a=b") is None
    assert parse_line("# tracer: nop") is None
    assert parse_line("CPU:1 [LOST 12 EVENTS]") is None


def test_trace_event_text_and_definition_of() -> None:
    ev = TraceEvent("xdp_exception", XdpException(1, 2, 3))
    assert ev.text == "prog_id=1 action=PASS ifindex=3"
    assert definition_of(XdpRedirectErr(0, 4, 0, 0, 0, 0, 0)).name == "xdp_redirect_err"
    with pytest.raises(TypeError):
        definition_of((1, 2, 3))


# --------------------------------------------------------------------------- firing

def test_counters_without_listeners_build_no_records(monkeypatch: pytest.MonkeyPatch) -> None:
    t = Tracer()

    def no_records(*a: Any, **k: Any) -> None:
        raise AssertionError("a record was built with nobody listening")
    monkeypatch.setattr(trace.Tracepoint, "_emit", no_records)
    t.xdp_exception.fire(7, 0, 2)
    t.xdp_exception.fire(7, 0, 2, n=4)
    t.xdp_exception.fire(7, 9, 2)
    t.xdp_redirect_err.fire(7, 2, 99, 0x7FFFFFFF, 0, -22, n=3)
    t.xdp_bulk_tx.fire(2, sent=10, drops=2, err=-6)
    t.xdp_bulk_tx.fire(2, sent=5, drops=0)
    t.xdp_devmap_xmit.fire(1, 3, sent=16, drops=1)
    t.xdp_cpumap_enqueue.fire(5, processed=8, drops=1, to_cpu=2, cpu=0)
    t.xdp_cpumap_kthread.fire(5, processed=8, drops=0, sched=1, xdp_pass=8, cpu=2)
    t.mem_connect.fire(1, 2, ifindex=3)
    t.mem_disconnect.fire(1, 2)
    t.bpf_xdp_link_attach_failed.fire("nope")
    assert not t.listening
    assert t.xdp_exception.counters == {(2, 0): [5], (2, 9): [1]}
    assert t.xdp_redirect_err.counters == {(2, -22): [3]}
    assert t.xdp_bulk_tx.columns == ("events", "sent", "drops", "errors")
    assert t.xdp_bulk_tx.counters == {(2,): [2, 15, 2, 1]}
    assert t.xdp_devmap_xmit.counters == {(1, 3): [1, 16, 1, 0]}
    assert t.xdp_cpumap_enqueue.counters == {(5, 0, 2): [1, 8, 1]}
    assert t.xdp_cpumap_kthread.counters == {(5, 2): [1, 8, 0, 1, 8, 0, 0]}
    assert t.mem_connect.counters == {(2, 3): [1]}
    assert t.bpf_xdp_link_attach_failed.counters == {(): [1]}
    assert t.xdp_exception.total() == 6


def test_fire_counts_is_the_histogram_of_a_batch() -> None:
    verdicts = np.array([0, 2, 2, 0, 1, 7, 0, 4])
    batch, single = Tracer(), Tracer()
    n = batch.xdp_exception.fire_counts("act", np.bincount(verdicts) * np.isin(
        np.arange(8), [0, 7]), prog_id=3, ifindex=2)
    assert n == 4
    for v in verdicts:
        if v in (0, 7):
            single.xdp_exception.fire(3, int(v), 2)
    assert batch.xdp_exception.counters == single.xdp_exception.counters == {
        (2, 0): [3], (2, 7): [1]}
    # The verdict rule of the receive paths: ABORTED and unknown actions.
    t = Tracer()
    assert t.xdp_exception.fire_actions(verdicts, prog_id=3, ifindex=2) == 4
    assert t.xdp_exception.counters == batch.xdp_exception.counters


def test_fire_batch_matches_per_event_firing() -> None:
    rng = np.random.default_rng(1)
    n = 500
    to = rng.integers(2, 5, n)
    errs = rng.choice([-22, -6, -95], n)
    sent = rng.integers(0, 16, n)
    drops = rng.integers(0, 3, n)
    batch, single = Tracer(), Tracer()
    assert batch.xdp_redirect_err.fire_batch(prog_id=1, ifindex=2, err=errs, to_ifindex=to,
                                             map_id=0x7FFFFFFF, map_index=0) == n
    batch.xdp_devmap_xmit.fire_batch(from_ifindex=1, to_ifindex=to, sent=sent, drops=drops,
                                     err=np.where(drops > 1, -6, 0))
    for i in range(n):
        single.xdp_redirect_err.fire(1, 2, int(to[i]), 0x7FFFFFFF, 0, int(errs[i]))
        single.xdp_devmap_xmit.fire(1, int(to[i]), int(sent[i]), int(drops[i]),
                                    -6 if drops[i] > 1 else 0)
    assert batch.xdp_redirect_err.counters == single.xdp_redirect_err.counters
    assert batch.xdp_devmap_xmit.counters == single.xdp_devmap_xmit.counters
    # Scalar-only and empty batches.
    assert batch.xdp_bulk_tx.fire_batch(ifindex=4, sent=8, drops=0, err=0) == 1
    assert batch.xdp_bulk_tx.fire_batch(ifindex=4, sent=np.array([], dtype=int), drops=0,
                                        err=0) == 0
    assert batch.xdp_bulk_tx.counters == {(4,): [1, 8, 0, 0]}
    with pytest.raises(TypeError):
        batch.xdp_bulk_tx.fire_batch(ifindex=4, sent=1, drops=0)  # err missing
    with pytest.raises(TypeError):
        batch.xdp_bulk_tx.fire_batch(ifindex=4, sent=1, drops=0, err=0, bogus=1)
    with pytest.raises(ValueError):
        batch.xdp_bulk_tx.fire_batch(ifindex=4, sent=np.zeros(2, int), drops=np.zeros(3, int),
                                     err=0)


def test_subscribe_gets_records_and_kernel_text() -> None:
    t = Tracer()
    got: list[TraceEvent] = []
    with t.subscribe(["xdp_exception", "xdp_redirect_err"], got.append) as sub:
        assert sub.events == ("xdp_exception", "xdp_redirect_err")
        assert t.xdp_exception.listening and not t.xdp_bulk_tx.listening
        t.xdp_exception.fire(47852, 7, 1)
        t.xdp_bulk_tx.fire(1, 1, 0)  # not subscribed
        t.xdp_redirect_err.fire(46509, 1, 9999, 0x7FFFFFFF, 0, -22, n=2)
    t.xdp_exception.fire(1, 0, 1)  # after close: counted, not delivered
    assert not t.listening
    assert [e.name for e in got] == ["xdp_exception", "xdp_redirect_err", "xdp_redirect_err"]
    assert got[0].text == "prog_id=47852 action=0x7 ifindex=1"
    assert got[1].record == XdpRedirectErr(46509, 4, 1, -22, 9999, 2147483647, 0)
    assert got[1].text == body(KERNEL_LINES[0])[1]
    assert got[0].pid == threading.get_native_id() and got[0].comm
    assert t.xdp_exception.total() == 2


def test_batch_firing_delivers_every_event() -> None:
    t = Tracer()
    q = t.listen("xdp_redirect")
    t.xdp_redirect.fire_batch(prog_id=1, ifindex=2, err=0, to_ifindex=np.array([3, 3, 4]),
                              map_id=5, map_index=np.array([0, 0, 1]))
    t.xdp_exception.fire_counts("act", [2], prog_id=1, ifindex=2)  # not listened to
    texts = [e.text for e in q]
    assert texts == [
        "prog_id=1 action=REDIRECT ifindex=2 to_ifindex=3 err=0 map_id=5 map_index=0",
        "prog_id=1 action=REDIRECT ifindex=2 to_ifindex=3 err=0 map_id=5 map_index=0",
        "prog_id=1 action=REDIRECT ifindex=2 to_ifindex=4 err=0 map_id=5 map_index=1"]
    assert t.xdp_redirect.counters == {(2, 3, 5): [2], (2, 4, 5): [1]}
    q.close()


def test_event_queue_bounds_and_waits() -> None:
    t = Tracer()
    q = t.listen(None, maxlen=3)
    for i in range(5):
        t.xdp_exception.fire(i, 0, 1)
    assert len(q) == 3 and q.lost == 2
    assert [e.record.prog_id for e in q.drain()] == [2, 3, 4]  # type: ignore[union-attr]
    assert q.get(timeout=0.01) is None
    threading.Timer(0.05, lambda: t.mem_disconnect.fire(1, 2)).start()
    ev = q.get(timeout=5)
    assert ev is not None and ev.name == "mem_disconnect"
    q.close()
    with pytest.raises(KeyError):
        t.subscribe("xdp_redirect_map", print)


def test_ingest_counts_foreign_events_like_fired_ones() -> None:
    fired, ingested = Tracer(), Tracer()
    fired.xdp_devmap_xmit.fire(1, 3, 4, 0)
    fired.xdp_cpumap_kthread.fire(24588, 5, 0, 1, cpu=0)
    for line in KERNEL_LINES:
        ev = parse_line(line)
        assert ev is not None
        if ev.name in ("xdp_devmap_xmit", "xdp_cpumap_kthread"):
            ingested.ingest(ev)
    ingested.ingest(XdpException(1, 0, 1))  # a bare record works too
    assert ingested.xdp_devmap_xmit.counters == fired.xdp_devmap_xmit.counters
    assert ingested.xdp_cpumap_kthread.counters == fired.xdp_cpumap_kthread.counters
    assert ingested.xdp_exception.counters == {(1, 0): [1]}


def test_redirect_target_as_tp_fast_assign() -> None:
    assert redirect_target(BpfMapType.BPF_MAP_TYPE_UNSPEC, 0x7FFFFFFF, 7) == (7, 0)
    assert redirect_target(BpfMapType.BPF_MAP_TYPE_DEVMAP, 3, 5, tgt_ifindex=9) == (9, 5)
    assert redirect_target(BpfMapType.BPF_MAP_TYPE_DEVMAP_HASH, 3, 5, None) == (0, 5)
    assert redirect_target(BpfMapType.BPF_MAP_TYPE_CPUMAP, 3, 2) == (0, 2)
    assert redirect_target(BpfMapType.BPF_MAP_TYPE_XSKMAP, 3, 1) == (0, 1)


def test_module_level_tracepoints_are_the_process_tracer() -> None:
    assert trace.xdp_exception is trace.TRACER.xdp_exception
    before = trace.xdp_exception.total()
    with trace.subscribe("xdp_exception", lambda e: None):
        trace.xdp_exception.fire(1, 0, 1)
    q = trace.listen("xdp_exception")
    trace.xdp_exception.fire(1, 0, 1)
    assert len(q.drain()) == 1
    q.close()
    assert trace.xdp_exception.total() == before + 2


# --------------------------------------------------------------------------- rates

class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_trace_session_rates() -> None:
    t, clock = Tracer(), FakeClock()
    s = TraceSession(t, clock)
    t.xdp_devmap_xmit.fire(1, 3, sent=16, drops=2)
    t.xdp_devmap_xmit.fire(1, 4, sent=4, drops=0)
    clock.now += 2.0
    iv = s.sample()
    assert iv.elapsed == 2.0
    assert iv.count("xdp_devmap_xmit") == 2
    assert iv.rate("xdp_devmap_xmit", "sent") == 10.0
    assert iv.rate("xdp_devmap_xmit", "sent", key=(1, 3)) == 8.0
    assert iv.rates("xdp_devmap_xmit") == {(1, 3): (0.5, 8.0, 1.0, 0.0),
                                           (1, 4): (0.5, 2.0, 0.0, 0.0)}
    t.xdp_devmap_xmit.fire(1, 3, sent=6, drops=0)
    clock.now += 0.5
    iv = s.sample()
    assert iv.deltas("xdp_devmap_xmit") == {(1, 3): (1, 6, 0, 0)}  # (1, 4) did not move
    assert iv.rate("xdp_devmap_xmit", "sent") == 12.0
    assert s.total().count("xdp_devmap_xmit", "sent") == 26
    assert s.total().elapsed == 2.5


# --------------------------------------------------------------------------- monitor

def _interval_with_traffic() -> Interval:
    t = Tracer()
    start = t.snapshot(0.0)
    t.xdp_exception.fire(3, 0, 2, n=20)
    t.xdp_exception.fire(3, 7, 2, n=2)
    t.xdp_redirect_err.fire(3, 2, 9999, 0x7FFFFFFF, 0, -22, n=10)
    t.xdp_redirect.fire(3, 2, 5, 0x7FFFFFFF, 0, n=100)
    t.xdp_devmap_xmit.fire(2, 5, sent=64, drops=2)
    t.xdp_cpumap_enqueue.fire(9, processed=8, drops=0, to_cpu=1, cpu=0)
    t.xdp_cpumap_kthread.fire(9, processed=8, drops=0, sched=1, xdp_pass=8, cpu=1)
    return Interval(start, t.snapshot(2.0))


def test_monitor_rows() -> None:
    iv = _interval_with_traffic()
    table = {label.strip(): cells for label, cells in rows(iv)}
    assert table["Summary"] == [("17", "err,drop/s"), ("32", "xmit/s")]  # (22+10+2)/2 s
    assert table["redirect_err total"] == [("5", "error/s")]
    assert table["xdp_exception total"] == [("11", "hit/s")]
    assert table["ABORTED"] == [("10", "hit/s")] and table["0x7"] == [("1", "hit/s")]
    assert table["devmap_xmit"] == [("32", "xmit/s"), ("1", "drop/s"), ("0", "drv_err/s"),
                                    ("64.00", "bulk-avg")]
    assert "redirect total" not in table  # -s only
    ext = {label.strip(): cells for label, cells in rows(iv, stats=True, extended=True,
                                                          lost=4)}
    assert ext["Summary"][0] == ("50", "redir/s")
    assert ext["ifindex 2 -> ifindex 5"] == [("50", "pkt/s")]
    assert ext["ifindex 2 EINVAL"] == [("5", "error/s")]
    assert ext["ABORTED ifindex 2"] == [("10", "hit/s")]
    assert ext["ifindex 2 -> 5"][0] == ("32", "xmit/s")
    assert ext["map 9 cpu 0 -> 1"] == [("4", "pkt/s"), ("0", "drop/s"), ("8.00", "bulk-avg")]
    assert ext["map 9 cpu 1"][3] == ("4", "xdp_pass/s")
    assert ext["lost events"] == [("2", "event/s")]


def test_monitor_userspace_mode_reads_a_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyxdp.cli import monitor as mon
    t = Tracer()
    real_sleep = mon.time.sleep

    def datapath_runs(seconds: float) -> None:  # traffic during the interval
        t.xdp_exception.fire_counts("act", [5], prog_id=1, ifindex=1)
        real_sleep(seconds)
    monkeypatch.setattr(mon.time, "sleep", datapath_runs)
    out = io.StringIO()
    assert run(kernel=False, tracer=t, interval=0.01, count=2, out=out) == 0
    text = out.getvalue()
    assert text.count("pyxdp monitor (userspace) interval") == 2
    assert "xdp_exception total" in text and "ABORTED" in text
    rich_out = io.StringIO()
    assert run(kernel=False, tracer=t, interval=0.01, count=1, out=rich_out, rich=True) == 0
    assert "xdp_exception total" in rich_out.getvalue()


@pytest.mark.parametrize("args", [["monitor", "-i", "0"], ["monitor", "-i", "x"],
                                  ["monitor", "--count", "0"]])
def test_monitor_bad_arguments(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pyxdp: ")


def test_monitor_help_documents_the_kernel_default() -> None:
    res = subprocess.run([sys.executable, "-m", "pyxdp.cli.main", "monitor", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0
    text = " ".join(res.stdout.split())
    for opt in ("-i SECONDS", "-s", "-e", "-v", "--count N", "--kernel"):
        assert opt in text
    assert "--kernel is the default" in text and "userspace" in text


# --------------------------------------------------------------------------- tracefs errors

def test_tracefs_not_mounted_and_no_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracefs, "_mounted_tracefs", lambda: [])
    monkeypatch.setattr(tracefs, "_DEBUGFS_TRACING", "/nonexistent-debugfs/tracing")
    monkeypatch.setattr(tracefs, "_sys_mount", lambda target, fstype: errno.EPERM)
    real_isdir = tracefs.os.path.isdir
    monkeypatch.setattr(tracefs.os.path, "isdir",
                        lambda p: True if p == tracefs.TRACEFS else real_isdir(p))
    with pytest.raises(TracefsUnavailable) as e:
        tracefs.tracefs_root()
    assert isinstance(e.value, BPFUnavailable) and e.value.errno == errno.EPERM
    assert "needs root" in str(e.value) and "mount -t tracefs" in str(e.value)
    with pytest.raises(TracefsUnavailable):
        tracefs.tracefs_root(mount=False)


def test_monitor_without_tracefs_rights_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Any) -> None:
    monkeypatch.setattr(tracefs, "tracefs_root", lambda mount=True: str(tmp_path))

    def refuse(path: str, *a: Any) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", path)
    monkeypatch.setattr(tracefs.os, "mkdir", refuse)
    assert main(["monitor", "--count", "1", "-i", "0.1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "create tracefs instance" in err and "EACCES" in err


def test_unknown_event_is_refused_before_tracefs() -> None:
    with pytest.raises(NotSupportedError):
        tracefs.TraceInstance.enable(object.__new__(tracefs.TraceInstance),  # type: ignore[arg-type]
                                     "xdp_redirect_map")


def test_layering_kernel_tracefs_does_not_import_the_datapath() -> None:
    code = ("import sys, pyxdp.kernel.tracefs\n"
            "bad = [m for m in sys.modules if m.split('.')[:2] in "
            "(['pyxdp','vm'], ['pyxdp','net'], ['pyxdp','maps'])]\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_snapshot_count_of_missing_key() -> None:
    snap = Snapshot(0.0, {"xdp_exception": {(1, 0): (3,)}}, {"xdp_exception": ("events",)})
    assert snap.count("xdp_exception", key=(9, 9)) == 0
    assert snap.count("xdp_exception") == 3
