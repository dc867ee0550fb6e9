"""``pyxdp prog list|show`` and ``pyxdp map show|dump|lookup|update|delete`` on the kernel's
objects, in bpftool's shapes.

Objects are named as bpftool names them: ``id N`` (``BPF_*_GET_FD_BY_ID``),
``pinned PATH`` (``BPF_OBJ_GET`` on a bpf filesystem) or ``name NAME`` (every
id walked with ``BPF_*_GET_NEXT_ID``, the kernel's 15-character object name
compared). Information comes from ``BPF_OBJ_GET_INFO_BY_FD``. Keys and values
are typed as bytes the way bpftool reads them - ``key 10 0 0 1``, ``key 0x0a
0 0 1`` or ``key hex 0a 00 00 01`` - and printed as hex bytes; when the map
carries BTF (``btf_id``, fetched with ``BPF_BTF_GET_FD_BY_ID``) each entry
also comes decoded by its key and value types (:mod:`pyxdp.btf.codec`), as
bpftool's ``formatted`` output. A per-CPU map's value is one per possible CPU
(each rounded up to 8 bytes, as the syscall lays them out); ``update`` writes
the same value to every CPU.

Walking ids and opening objects by id need ``CAP_SYS_ADMIN``: without it the
command stops with one line saying so.
"""

from __future__ import annotations

import errno as _errno
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pyxdp.cli.options import STYLE, CliError, emit
from pyxdp.errors import BPFUnavailable, KernelError, PyxdpError
from pyxdp.uapi.bpf import BpfMapType, BpfProgType

if TYPE_CHECKING:
    from pyxdp.btf.codec import BtfCodec
    from pyxdp.kernel.syscall import MapInfo

__all__ = ["MAP_EPILOG", "MAP_VERBS", "Target", "ValueLayout", "cmd_map", "cmd_prog_show",
           "entry_doc", "parse_bytes", "parse_target", "print_entry", "split_kv", "type_name"]

MAP_VERBS: Final = {
    "show": "kernel maps (MAP; none: all), or the maps of an object file (OBJ)",
    "dump": "every entry of a kernel map (MAP), or the maps of an object after loading "
            "(OBJ [NAME], JSON)",
    "lookup": "one entry of a kernel map: MAP key DATA",
    "update": "write an entry of a kernel map: MAP key DATA value DATA [any|exist|noexist]",
    "delete": "remove an entry of a kernel map: MAP key DATA",
}
MAP_EPILOG: Final = (
    "MAP is 'id N', 'pinned PATH' or 'name NAME', as bpftool, or 'run PID NAME': a map of "
    "a running 'pyxdp run --iface' ('map show run' lists them). DATA is bytes: decimal or "
    "0x-prefixed tokens (key 10 0 0 1, key 0x0a 0 0 1) or 'hex' and hex pairs (key hex 0a 00 "
    "00 01). Kernel maps need root.")

_KINDS: Final = ("id", "pinned", "name")
_PERCPU: Final = {BpfMapType.BPF_MAP_TYPE_PERCPU_HASH, BpfMapType.BPF_MAP_TYPE_PERCPU_ARRAY,
                  BpfMapType.BPF_MAP_TYPE_LRU_PERCPU_HASH,
                  BpfMapType.BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE}
_FLAGS: Final = {"any": 0, "noexist": 1, "exist": 2}


@dataclass(frozen=True, slots=True)
class Target:
    """Which kernel objects a command means: all, or by id, pin path or name."""

    kind: str  # all, id, pinned, name
    value: str = ""

    def __str__(self) -> str:
        return "all" if self.kind == "all" else f"{self.kind} {self.value}"


def parse_target(tokens: Sequence[str], what: str) -> tuple[Target, list[str]] | None:
    """``id N`` / ``pinned PATH`` / ``name NAME`` (and the tokens after it), ``all`` for
    none; ``None`` when the first token is an object file (today's behaviour)."""
    if not tokens:
        return Target("all"), []
    if tokens[0] not in _KINDS:
        return None
    if len(tokens) < 2:
        raise CliError(f"{what} {tokens[0]}: missing its value ({what} {tokens[0]} "
                       f"{'N' if tokens[0] == 'id' else tokens[0].upper()})")
    if tokens[0] == "id":
        try:
            n = int(tokens[1], 0)
        except ValueError:
            raise CliError(f"{what} id: not a number: {tokens[1]!r}") from None
        if not 0 < n <= 0xFFFF_FFFF:
            raise CliError(f"{what} id: {n} is outside 1..4294967295")
    return Target(tokens[0], tokens[1]), list(tokens[2:])


def parse_bytes(tokens: Sequence[str], what: str) -> bytes:
    """bpftool's DATA: ``hex 0a 00`` or byte tokens (decimal, 0x.., 0o..)."""
    if not tokens:
        raise CliError(f"{what}: no bytes given")
    if tokens[0] == "hex":
        text = "".join(tokens[1:])
        try:
            return bytes.fromhex(text)
        except ValueError:
            raise CliError(f"{what}: not hex bytes: {' '.join(tokens[1:])!r}") from None
    out = bytearray()
    for t in tokens:
        try:
            b = int(t, 0)
        except ValueError:
            raise CliError(f"{what}: {t!r} is not a byte (decimal, 0x.. or 'hex' then hex "
                           f"pairs)") from None
        if not 0 <= b <= 255:
            raise CliError(f"{what}: {t} is not a byte (0..255)")
        out.append(b)
    return bytes(out)


def _kernel(call: str) -> Any:
    """The kernel module, after checking that bpf(2) is reachable at all."""
    from pyxdp import kernel
    ok, why = kernel.bpf_available()
    if not ok:
        raise CliError(f"{call}: needs root and BPF: {why}")
    return kernel


def _denied(call: str, e: KernelError) -> CliError:
    if isinstance(e, BPFUnavailable) or getattr(e, "errno", 0) == _errno.EPERM:
        return CliError(f"{call}: needs root (CAP_SYS_ADMIN): {e}")
    if getattr(e, "errno", 0) == _errno.ENOENT:
        return CliError(f"{call}: no such object ({e})")
    return CliError(f"{call}: {e}")


def type_name(enum: type[BpfProgType] | type[BpfMapType], prefix: str, value: int) -> str:
    try:
        return enum(value).name.removeprefix(prefix).lower()
    except ValueError:
        return f"type {value}"


def _ids(kernel: Any, what: str) -> Iterator[int]:
    step = kernel.prog_get_next_id if what == "prog" else kernel.map_get_next_id
    cur = 0
    while (nxt := step(cur)) is not None:
        yield nxt
        cur = nxt


def _open(kernel: Any, what: str, obj_id: int) -> Any:
    return (kernel.prog_get_fd_by_id if what == "prog" else kernel.map_get_fd_by_id)(obj_id)


def _info(kernel: Any, what: str, fd: Any) -> Any:
    return (kernel.prog_get_info if what == "prog" else kernel.map_get_info)(fd)


def _resolve(what: str, target: Target, call: str) -> list[tuple[Any, Any]]:
    """(fd, info) of every object the target names; fds are the caller's to close."""
    kernel = _kernel(call)
    out: list[tuple[Any, Any]] = []
    try:
        if target.kind == "pinned":
            from pyxdp.kernel.link import obj_get
            fd = obj_get(target.value)
            if fd.kind != what:
                fd.close()
                raise CliError(f"{call}: {target.value} is a pinned "
                               f"{fd.kind or 'object'}, not a {what}")
            return [(fd, _info(kernel, what, fd))]
        if target.kind == "id":
            fd = _open(kernel, what, int(target.value, 0))
            return [(fd, _info(kernel, what, fd))]
        for obj_id in list(_ids(kernel, what)):
            try:
                fd = _open(kernel, what, obj_id)
            except KernelError as e:
                if getattr(e, "errno", 0) == _errno.ENOENT:
                    continue  # went away while we walked
                raise
            info = _info(kernel, what, fd)
            if target.kind == "all" or info.name == target.value[:15]:
                out.append((fd, info))
            else:
                fd.close()
    except KernelError as e:
        for fd, _ in out:
            fd.close()
        raise _denied(call, e) from None
    if target.kind == "name" and not out:
        raise CliError(f"{call}: no {what} named {target.value!r}")
    return out


def _one(what: str, target: Target, call: str) -> tuple[Any, Any]:
    found = _resolve(what, target, call)
    if len(found) > 1:
        ids = ", ".join(str(i.id) for _, i in found)
        for fd, _ in found:
            fd.close()
        raise CliError(f"{call}: {len(found)} {what}s named {target.value!r} (ids {ids}): "
                       f"choose one with 'id N'")
    return found[0]


# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------

def _prog_doc(info: Any) -> dict[str, Any]:
    return {"id": info.id, "type": type_name(BpfProgType, "BPF_PROG_TYPE_", info.type),
            "name": info.name, "tag": info.tag_hex, "gpl_compatible": info.gpl_compatible,
            "jited": info.jited_prog_len > 0, "bytes_xlated": info.xlated_prog_len,
            "bytes_jited": info.jited_prog_len, "map_ids": list(info.map_ids),
            "btf_id": info.btf_id, "run_cnt": info.run_cnt, "run_time_ns": info.run_time_ns,
            "verified_insns": info.verified_insns}


def cmd_prog_show(target: Target) -> int:
    """``prog list`` / ``prog show [id N | pinned PATH | name NAME]``."""
    found = _resolve("prog", target, "prog show" if target.kind == "all" else f"prog show {target}")
    docs = []
    for fd, info in found:
        fd.close()
        docs.append(_prog_doc(info))
    if STYLE.json:
        emit(docs)
        return 0
    for d in docs:
        print(f"{d['id']}: {d['type']}  name {d['name'] or '-'}  tag {d['tag']}"
              + ("  gpl" if d["gpl_compatible"] else ""))
        jited = f"jited {d['bytes_jited']}B" if d["jited"] else "not jited"
        maps = f"  map_ids {','.join(map(str, d['map_ids']))}" if d["map_ids"] else ""
        print(f"\txlated {d['bytes_xlated']}B  {jited}{maps}")
        if d["btf_id"]:
            print(f"\tbtf_id {d['btf_id']}")
    return 0


# --------------------------------------------------------------------------
# Maps
# --------------------------------------------------------------------------

def _map_doc(info: Any) -> dict[str, Any]:
    doc = {"id": info.id, "type": type_name(BpfMapType, "BPF_MAP_TYPE_", info.type),
           "name": info.name, "flags": info.map_flags, "bytes_key": info.key_size,
           "bytes_value": info.value_size, "max_entries": info.max_entries}
    if info.btf_id:
        doc["btf_id"] = info.btf_id
    return doc


@dataclass(frozen=True, slots=True)
class ValueLayout:
    """How a map's values read and print: per-CPU copies (each ``value_size`` rounded up
    to 8, one per possible CPU, as bpf(2) lookups give them) and the BTF codec that
    formats them. Kernel maps (``map ... id N``) and a pyxdp run's maps
    (:mod:`pyxdp.cli.run_maps`) alike."""

    map_type: int
    value_size: int
    ncpus: int
    codec: BtfCodec | None

    @property
    def percpu(self) -> bool:
        return self.map_type in _PERCPU

    @property
    def stride(self) -> int:
        return (self.value_size + 7) & ~7

    @property
    def lookup_size(self) -> int:
        return self.stride * self.ncpus if self.percpu else self.value_size

    def update_value(self, value: bytes) -> bytes:
        """What an update writes for ``value``: bpftool's same value on every CPU."""
        return (value + bytes(self.stride - len(value))) * self.ncpus if self.percpu else value


def _access(info: MapInfo) -> ValueLayout:
    from pyxdp import kernel
    codec: BtfCodec | None = None
    if info.btf_id and (info.btf_key_type_id or info.btf_value_type_id):
        try:
            from pyxdp.btf.btf import Btf
            from pyxdp.btf.codec import BtfCodec
            with kernel.btf_get_fd_by_id(info.btf_id) as bfd:
                btf = Btf.parse(kernel.btf_get_data(bfd))
            codec = BtfCodec(btf, info.btf_key_type_id or None, info.btf_value_type_id or None)
        except (PyxdpError, ValueError, LookupError):
            codec = None  # a BTF pyxdp cannot read: the raw bytes still print
    return ValueLayout(info.type, info.value_size, kernel.possible_cpus(), codec)


def _hex(data: bytes) -> str:
    return " ".join(f"{b:02x}" for b in data)


def _formatted(codec: Any, part: str, raw: bytes) -> Any:
    tc = getattr(codec, part, None)
    if tc is None:
        return None
    value = tc.decode(raw)
    return json.loads(json.dumps(value, default=lambda b: _hex(bytes(b))))


def entry_doc(m: ValueLayout, key: bytes, value: bytes) -> dict[str, Any]:
    doc: dict[str, Any] = {"key": [f"0x{b:02x}" for b in key]}
    if m.percpu:
        vals = [value[c * m.stride:c * m.stride + m.value_size] for c in range(m.ncpus)]
        doc["values"] = [{"cpu": c, "value": [f"0x{b:02x}" for b in v]}
                         for c, v in enumerate(vals)]
    else:
        doc["value"] = [f"0x{b:02x}" for b in value]
    if m.codec is not None:
        fmt: dict[str, Any] = {"key": _formatted(m.codec, "key", key)}
        if m.percpu:
            fmt["values"] = [{"cpu": c, "value": _formatted(
                m.codec, "value", value[c * m.stride:c * m.stride + m.value_size])}
                for c in range(m.ncpus)]
        else:
            fmt["value"] = _formatted(m.codec, "value", value)
        doc["formatted"] = fmt
    return doc


def print_entry(doc: dict[str, Any]) -> None:
    key = " ".join(b[2:] for b in doc["key"])
    fmt = doc.get("formatted")
    if "values" in doc:
        print(f"key: {key}")
        for v in doc["values"]:
            print(f"\tvalue (CPU {v['cpu']:02d}): {' '.join(b[2:] for b in v['value'])}")
    else:
        print(f"key: {key}  value: {' '.join(b[2:] for b in doc['value'])}")
    if fmt is not None:
        print(f"\tformatted: {json.dumps(fmt)}")


def split_kv(rest: list[str], call: str, want_value: bool) -> tuple[bytes, bytes | None, int]:
    if not rest or rest[0] != "key":
        raise CliError(f"{call}: expected 'key DATA'" + (" 'value DATA'" if want_value else ""))
    rest = rest[1:]
    flags = 0
    if want_value:
        if "value" not in rest:
            raise CliError(f"{call}: expected 'value DATA' after the key")
        i = rest.index("value")
        key_tokens, value_tokens = rest[:i], rest[i + 1:]
        if value_tokens and value_tokens[-1] in _FLAGS:
            flags = _FLAGS[value_tokens.pop()]
        return parse_bytes(key_tokens, f"{call}: key"), \
            parse_bytes(value_tokens, f"{call}: value"), flags
    return parse_bytes(rest, f"{call}: key"), None, 0


def _check_size(data: bytes, size: int, what: str, call: str) -> None:
    if len(data) != size:
        raise CliError(f"{call}: the {what} has {len(data)} bytes; the map's {what} has {size}")


def cmd_map(verb: str, target: Target, rest: list[str]) -> int:
    """``map show|dump|lookup|update|delete`` on kernel maps."""
    call = f"map {verb} {target}".replace(" all", "")
    if verb == "show":
        if rest:
            raise CliError(f"{call}: unexpected {' '.join(rest)!r}")
        found = _resolve("map", target, call)
        docs = []
        for fd, info in found:
            fd.close()
            docs.append(_map_doc(info))
        if STYLE.json:
            emit(docs)
            return 0
        for d in docs:
            print(f"{d['id']}: {d['type']}  name {d['name'] or '-'}  flags {d['flags']:#x}")
            print(f"\tkey {d['bytes_key']}B  value {d['bytes_value']}B  "
                  f"max_entries {d['max_entries']}" + (f"  btf_id {d['btf_id']}"
                                                       if "btf_id" in d else ""))
        return 0
    if target.kind == "all":
        raise CliError(f"map {verb}: which map? (id N, pinned PATH or name NAME)")
    fd, info = _one("map", target, call)
    from pyxdp import kernel
    try:
        with fd:
            m = _access(info)
            if verb == "dump":
                if rest:
                    raise CliError(f"{call}: unexpected {' '.join(rest)!r}")
                docs = []
                for key in kernel.map_keys(fd, info.key_size):
                    value = kernel.map_lookup_elem(fd, key, m.lookup_size)
                    if value is not None:  # deleted while we walked
                        docs.append(entry_doc(m, key, value))
                if STYLE.json:
                    emit(docs)
                else:
                    for d in docs:
                        print_entry(d)
                    print(f"Found {len(docs)} element{'s' if len(docs) != 1 else ''}")
                return 0
            key, value, flags = split_kv(rest, call, verb == "update")
            _check_size(key, info.key_size, "key", call)
            if verb == "lookup":
                got = kernel.map_lookup_elem(fd, key, m.lookup_size)
                if got is None:
                    raise CliError(f"{call}: key {_hex(key)} not found")
                doc = entry_doc(m, key, got)
                if STYLE.json:
                    emit(doc)
                else:
                    print_entry(doc)
                return 0
            if verb == "update":
                assert value is not None
                _check_size(value, info.value_size, "value", call)
                value = m.update_value(value)
                kernel.map_update_elem(fd, key, value, flags)
            else:
                kernel.map_delete_elem(fd, key)
            if STYLE.json:
                emit({"id": info.id, verb: True, "key": [f"0x{b:02x}" for b in key]})
            return 0
    except KernelError as e:
        if getattr(e, "errno", 0) == _errno.ENOENT and verb == "delete":
            raise CliError(f"{call}: key not found") from None
        raise _denied(call, e) from None
