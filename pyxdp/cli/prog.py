"""``pyxdp prog show|disasm|run``, ``pyxdp map dump`` and ``pyxdp run``: bpftool and
xdpdump shapes over pyxdp's Collection.

``prog run`` prints bpftool's line (``Return value: N, duration: Nns``, with
`` (average)`` for repeated runs); ``run --pcap`` runs a program over a
capture with maps persisting from packet to packet, counts verdicts, and can
write each packet as the program left it to pcapng with the XDP verdict in
``epb_verdict``, as xdpdump does.
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from pyxdp import samples
from pyxdp.asm.disasm import disassemble
from pyxdp.cli.options import CliError, _read_input, _write_output, open_output
from pyxdp.collection import Collection, Map, Program
from pyxdp.elf import load_collection_spec
from pyxdp.errors import PyxdpError
from pyxdp.uapi.bpf import BpfAttachType, XdpAction

__all__ = ["cmd_map_dump", "cmd_map_show", "cmd_prog_disasm", "cmd_prog_run", "cmd_prog_show",
           "cmd_prog_verify", "cmd_run"]


def _object(obj: str) -> Path:
    """An object file's path, once a bounded read showed it is within the input limit;
    ``samples/NAME.o`` finds the shipped sample from any directory (pyxdp.samples)."""
    obj = os.fspath(samples.resolve(obj))
    _read_input(obj)
    return Path(obj)


def _json_value(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return " ".join(f"{b:02x}" for b in v)
    if isinstance(v, dict):
        return {k: _json_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_value(x) for x in v]
    return v


def _from_json(v: Any, ifindex: Callable[[str], int] | None = None) -> Any:
    if isinstance(v, str):
        if v.startswith("@"):  # "@IF": an interface's ifindex, where the command has them
            if ifindex is None:
                raise CliError(f"{v!r}: interface names are resolved by 'run --iface' and "
                               "'explain' only")
            try:
                return ifindex(v[1:])
            except OSError:
                raise CliError(f"{v!r}: no interface {v[1:]!r}") from None
        try:
            return bytes.fromhex(v.replace("0x", "").replace(":", " "))
        except ValueError:
            pass
        try:  # an address, as --dump-maps writes __be32 and in6_addr members
            ipaddress.ip_address(v)
            return v
        except ValueError:
            raise CliError(f"{v!r} is neither a hex byte string nor an IP address") from None
    if isinstance(v, dict):
        return {k: _from_json(x, ifindex) for k, x in v.items()}
    if isinstance(v, list):
        return [_from_json(x, ifindex) for x in v]
    return v


def _load(obj: str, backend: str = "userspace", verify: bool = True) -> Collection:
    return Collection(load_collection_spec(_object(obj)), backend, verify=verify)


def fill_maps(coll: Collection, path: str,
              ifindex: Callable[[str], int] | None = None) -> None:
    """``--maps F``: ``{"map": [{"key": K, "value": V}, ...]}`` (ints, hex strings, dicts)."""
    try:
        doc = json.loads(_read_input(path))
    except json.JSONDecodeError as e:
        raise CliError(f"{path}: not JSON: {e.msg} at line {e.lineno}") from None
    except RecursionError:
        raise CliError(f"{path}: JSON nests deeper than Python's parser follows") from None
    except UnicodeDecodeError as e:
        raise CliError(f"{path}: not JSON: {e.reason} at byte {e.start}") from None
    if not isinstance(doc, dict):
        raise CliError(f"{path}: expected an object mapping map names to entry lists")
    for name, entries in doc.items():
        m = coll.maps.get(name)
        if m is None:
            raise CliError(f"{path}: the object has no map {name!r} "
                           f"(maps: {', '.join(coll.maps)})")
        if not isinstance(entries, list):
            raise CliError(f"{path}: map {name!r} needs a list of {{key, value}} entries")
        for entry in entries:
            if not isinstance(entry, dict) or "key" not in entry or "value" not in entry:
                raise CliError(f"{path}: map {name!r}: each entry needs 'key' and 'value'")
            try:
                key = _from_json(entry["key"], ifindex)
                value = _from_json(entry["value"], ifindex)
            except RecursionError:
                raise CliError(f"{path}: map {name!r}: an entry nests too deeply") from None
            try:
                m.update(key, value)
            except (TypeError, ValueError, OverflowError) as e:
                raise CliError(f"{path}: map {name!r}: {e}") from None


def dump_maps(coll: Collection) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, m in coll.maps.items():
        out[name] = _dump_map(m)
    return out


def _dump_map(m: Map) -> Any:
    try:
        return [{"key": _json_value(entry["key"]), "value": _json_value(entry["value"])}
                for entry in m.dump()]
    except PyxdpError as e:
        return {"error": str(e)}


def _program(coll: Collection, section: str | None) -> Program:
    not_runnable = (BpfAttachType.BPF_XDP_DEVMAP, BpfAttachType.BPF_XDP_CPUMAP)
    progs = {n: p for n, p in coll.programs.items()
             if p.spec.expected_attach_type not in not_runnable}
    if section is None:
        if len(progs) == 1:
            return next(iter(progs.values()))
        raise CliError(f"the object has {len(coll.programs)} programs "
                       f"({', '.join(coll.programs)}): choose one with -s")
    return coll.program(section)


def cmd_prog_show(obj: str) -> int:
    from pyxdp.cli.options import STYLE, emit
    spec = load_collection_spec(_object(obj))
    progs: list[dict[str, Any]] = []
    for name, p in spec.programs.items():
        maps = sorted({r.map_name for r in p.map_refs})
        # What pyxdp's engines cannot run is listed and skipped, as autoload=false.
        notes = (["no program type in libbpf 1.x"] if p.prog_type == "unspec" else
                 [] if p.userspace else ["kernel only"]) + ([] if p.autoload else
                                                            ["autoload off"])
        progs.append({"name": name, "section": p.section, "type": p.prog_type,
                      "insns": len(p.insns), "license": p.license or "", "maps": maps,
                      "notes": notes})
    maps_doc = [{"name": name, "type": m.type_name, "bytes_key": m.key_size,
                 "bytes_value": m.value_size, "max_entries": m.max_entries, "flags": m.flags}
                for name, m in spec.maps.items()]
    if STYLE.json:
        emit({"programs": progs, "maps": maps_doc})
        return 0
    for d in progs:
        print(f"{d['name']}: section {d['section']}  type {d['type']}  insns {d['insns']}  "
              f"license {d['license'] or '-'}" + (f"  maps {','.join(d['maps'])}"
                                                  if d["maps"] else "")
              + (f"  ({', '.join(d['notes'])})" if d["notes"] else ""))
    _print_maps(maps_doc)
    return 0


def _print_maps(maps_doc: list[dict[str, Any]]) -> None:
    for m in maps_doc:
        per_cpu = " (possible CPUs)" if m["type"] == "perf_event_array" and \
            not m["max_entries"] else ""
        print(f"map {m['name']}: {m['type']}  key {m['bytes_key']}B  value "
              f"{m['bytes_value']}B  max_entries {m['max_entries']}{per_cpu}"
              + (f"  flags {m['flags']:#x}" if m["flags"] else ""))


def cmd_map_show(obj: str) -> int:
    """``map show OBJ``: the maps an object file declares."""
    from pyxdp.cli.options import STYLE, emit
    spec = load_collection_spec(_object(obj))
    maps_doc = [{"name": name, "type": m.type_name, "bytes_key": m.key_size,
                 "bytes_value": m.value_size, "max_entries": m.max_entries, "flags": m.flags}
                for name, m in spec.maps.items()]
    if STYLE.json:
        emit(maps_doc)
    else:
        _print_maps(maps_doc)
    return 0


def cmd_prog_disasm(obj: str, section: str | None) -> int:
    spec = load_collection_spec(_object(obj))
    names = list(spec.programs) if section is None else [
        n for n, p in spec.programs.items() if section in (n, p.section)]
    if not names:
        raise CliError(f"no program named {section!r} (programs: {', '.join(spec.programs)})")
    from pyxdp.cli.options import STYLE, emit
    docs: list[dict[str, Any]] = []
    for name in names:
        p = spec.programs[name]
        insns: list[dict[str, Any]] = []
        slot = 0
        for text in disassemble(p.insns, pc_prefix=True):
            insns.append({"pc": slot, "text": text, "source": p.source_line(slot) or ""})
            slot += 2 if p.insns[slot].code == 0x18 else 1
        docs.append({"name": name, "section": p.section, "insns": insns})
    if STYLE.json:
        emit(docs)
        return 0
    for d in docs:
        print(f"{d['name']} ({d['section']}):")
        last = None
        for insn in d["insns"]:
            if insn["source"] and insn["source"] != last:
                print(f"; {insn['source']}")
                last = insn["source"]
            print(insn["text"])
    return 0


def cmd_prog_verify(obj: str, section: str | None, log_level: int) -> int:
    """``pyxdp prog verify``: pyxdp's verifier on every program (or one), Linux's log lines;
    exit status 1 when a program is refused."""
    from pyxdp.errors import NotSupportedError, VerifierError
    from pyxdp.verifier import verify
    spec = load_collection_spec(Path(obj))
    names = [n for n, p in spec.programs.items() if section is None or section in (n, p.section)]
    if not names:
        raise CliError(f"no program named {section!r} (programs: {', '.join(spec.programs)})")
    from pyxdp.cli.options import STYLE, emit
    refused = 0
    docs: list[dict[str, Any]] = []
    for name in names:
        p = spec.programs[name]
        try:
            res = verify(p, spec.maps, btf=spec.btf)
        except NotSupportedError as e:  # a type pyxdp's verifier does not model: no verdict
            docs.append({"name": name, "section": p.section, "accepted": None,
                         "reason": str(e), "log": [str(e)]})
            continue
        except VerifierError as e:
            refused += 1
            lines = e.log.splitlines() if log_level >= 1 else [e.reason]
            docs.append({"name": name, "section": p.section, "accepted": False,
                         "reason": e.reason, "log": lines})
            continue
        lines = [res.log.splitlines()[-1]] if log_level >= 1 else []
        if log_level >= 2:
            lines.append(f"stack depth {'+'.join(str(d) for d in res.stack_depth)}")
        docs.append({"name": name, "section": p.section, "accepted": True, "log": lines,
                     "stack_depth": list(res.stack_depth)})
    if STYLE.json:
        emit(docs)
    else:
        for d in docs:
            verdict = {True: "accepted", False: "refused", None: "not verified"}[d["accepted"]]
            print(f"{d['name']} ({d['section']}): {verdict}")
            for line in d["log"]:
                print(f"  {line}")
    return 1 if refused else 0


def _streams(prog: Program) -> dict[str, str]:
    """What the run printed into the program's BPF streams (read, so consumed), for a
    program that prints into them (bpf_stream_printk)."""
    if not any(k.name == "bpf_stream_vprintk_impl" for k in prog.spec.kfuncs):
        return {}
    return {name: prog.stream_read(sid, 1 << 20).decode("latin-1")
            for name, sid in (("stdout", 1), ("stderr", 2))}


def _print_result(res: Any, repeat: int, streams: dict[str, str]) -> None:
    avg = " (average)" if repeat > 1 else ""
    print(f"Return value: {res.retval}, duration{avg}: {res.duration_ns}ns")
    if res.fault:
        print(f"aborted: {res.fault}")
    if res.redirect:
        print("redirect: " + ", ".join(f"{k}={v}" for k, v in res.redirect.items()))
    for line in res.trace:
        print(f"trace_printk: {line}")
    for name, text in streams.items():
        for line in text.splitlines():
            print(f"{name}: {line}")
    for line in res.insn_trace:
        print(line)


def cmd_prog_run(obj: str, section: str | None, data_in: str, data_out: str | None,
                 ctx_in: str | None, ctx_out: str | None, repeat: int, backend: str,
                 maps_in: str | None, maps_out: str | None, trace: bool,
                 verify: bool = True) -> int:
    if repeat < 0:
        raise CliError("--repeat must be >= 0")
    data = _read_input(data_in)
    ctx = _read_input(ctx_in) if ctx_in else None
    with _load(obj, backend, verify) as coll:
        if maps_in:
            fill_maps(coll, maps_in)
        prog = _program(coll, section)
        res = prog.test_run(data, ctx_in=ctx, ctx_size_out=24 if (ctx_out or ctx) else 0,
                            repeat=repeat, trace=trace)
        streams = _streams(prog)
        if data_out:
            _write_output(data_out, res.data_out)
        if ctx_out and res.ctx_out is not None:
            _write_output(ctx_out, res.ctx_out)
        out = sys.stderr if data_out == "-" else sys.stdout
        saved, sys.stdout = sys.stdout, out
        try:
            from pyxdp.cli.options import STYLE, emit
            if STYLE.json:
                emit({"retval": res.retval, "action": _action_name(res.retval),
                      "duration_ns": res.duration_ns, "repeat": repeat,
                      "data_out": _json_value(bytes(res.data_out)),
                      "fault": str(res.fault) if res.fault else None,
                      "redirect": dict(res.redirect) if res.redirect else {},
                      "trace_printk": list(res.trace), **streams})
            else:
                _print_result(res, repeat, streams)
        finally:
            sys.stdout = saved
        if maps_out:
            _write_output(maps_out, (json.dumps(dump_maps(coll), indent=2) + "\n").encode())
    return 0


def cmd_map_dump(obj: str, name: str | None, backend: str, maps_in: str | None,
                 verify: bool = True) -> int:
    with _load(obj, backend, verify) as coll:
        if maps_in:
            fill_maps(coll, maps_in)
        if name is not None and name not in coll.maps:
            raise CliError(f"no map named {name!r} (maps: {', '.join(coll.maps)})")
        doc = dump_maps(coll) if name is None else {name: _dump_map(coll.maps[name])}
        from pyxdp.cli.options import STYLE
        print(json.dumps(doc, indent=None if STYLE.json and not STYLE.pretty else 2))
    return 0


def _action_name(act: int) -> str:
    try:
        return XdpAction(act).name
    except ValueError:
        return f"unknown({act})"


def cmd_run(obj: str, section: str | None, pcap: str, write: str | None, maps_in: str | None,
            maps_out: str | None, backend: str, verify: bool = True,
            filter_expr: str = "") -> int:
    from pyxdp.net.pcap import PcapngWriter, read_capture
    from pyxdp.net.pcap_filter import filter_capture
    counts: Counter[str] = Counter()
    aborted: list[str] = []
    with _load(obj, backend, verify) as coll:
        if maps_in:
            fill_maps(coll, maps_in)
        prog = _program(coll, section)
        writer: PcapngWriter | None = None
        out: BinaryIO | None = None
        try:
            if write:
                out = open_output(write)
                writer = PcapngWriter(out)
                writer.add_interface("pyxdp")
            n = 0
            packets = read_capture(pcap)
            for pkt in filter_capture(packets, filter_expr) if filter_expr else packets:
                n += 1
                res = prog.test_run(pkt.data)
                name = _action_name(res.retval)
                counts[name] += 1
                if res.fault and len(aborted) < 5:
                    aborted.append(f"packet {n}: {res.fault}")
                if writer is not None:
                    writer.write(res.data_out, pkt.ts_ns, verdict=res.retval)
        finally:
            if writer is not None:
                writer.close()
            if out is not None and out is not sys.stdout.buffer:
                out.close()
        from pyxdp.cli.options import STYLE
        report = sys.stderr if write == "-" else sys.stdout
        verdicts = {a: counts.pop(a, 0) for a in ("XDP_ABORTED", "XDP_DROP", "XDP_PASS",
                                                   "XDP_TX", "XDP_REDIRECT")}
        verdicts.update(sorted(counts.items()))
        if maps_out == "-" and write == "-":
            raise CliError("-w - and --dump-maps - both want stdout: give one a file")
        if STYLE.json:
            doc = {"packets": n, "program": prog.name, "section": prog.section,
                   "verdicts": verdicts, "aborted": aborted}
            print(json.dumps(doc, indent=2 if STYLE.pretty else None), file=report)
        else:
            # The summary only: map contents are written when asked (--dump-maps).
            print(f"{n} packets through {prog.name} ({prog.section}):", file=report)
            for action, c in verdicts.items():
                print(f"  {action:<13}{c}", file=report)
            for line in aborted:
                print(f"  {line}", file=report)
            if write and write != "-":
                print(f"  written to {write}", file=report)
        if maps_out:
            _write_output(maps_out, (json.dumps(dump_maps(coll), indent=2) + "\n").encode())
    return 0
