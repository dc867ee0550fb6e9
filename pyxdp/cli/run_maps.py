"""The maps of a running ``pyxdp run --iface``, reachable from other processes.

A kernel map outlives the command that loaded it and any process reaches it
with ``bpftool map ... id N`` (or through a bpffs pin). A pyxdp dataplane's
maps live in its own process, so ``pyxdp run --iface`` serves them: on the
abstract Unix socket ``@pyxdp-run-PID`` (gone with the process, SIGKILL
included; abstract sockets belong to a network namespace, so a client runs in
the dataplane's), to processes of the same user or root (``SO_PEERCRED``), one
JSON request per line and one JSON answer per line. The requests are
bpf(2)'s map commands on raw bytes (show, dump, lookup, update, delete), run
on the maps' own byte-level handles under the host lock, so they mean what the
same command means on a kernel map, and ``pyxdp map VERB run PID [NAME] ...``
prints the answers as ``pyxdp map VERB id N`` prints a kernel map's.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

from pyxdp.cli.options import STYLE, CliError, emit
from pyxdp.errors import PyxdpError

__all__ = ["MapServer", "cmd_run_map", "runs", "serve", "serving"]

PREFIX = "pyxdp-run-"
_UCRED = struct.Struct("=iII")  # struct ucred: pid, uid, gid
_MAX_LINE = 1 << 20  # a request is small; a longer line is not one of ours


def _address(pid: int) -> str:
    return f"\0{PREFIX}{pid}"


class MapServer:
    """The serving thread of one dataplane (:func:`serve`); :meth:`close` stops it."""

    def __init__(self, sock: socket.socket, handle: Callable[[dict[str, Any]], Any]) -> None:
        self._sock = sock
        self._handle = handle
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="pyxdp-run-maps",
                                        daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            with conn:
                self._one(conn)

    def _one(self, conn: socket.socket) -> None:
        pid, uid, _ = _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                    _UCRED.size))
        conn.settimeout(5.0)
        try:
            if uid not in (0, os.geteuid()):
                answer: Any = {"error": f"uid {uid} may not reach the maps of uid "
                                        f"{os.geteuid()}"}
            else:
                line = _read_line(conn)
                try:
                    req = json.loads(line)
                    if not isinstance(req, dict):
                        raise ValueError("not an object")
                except ValueError as e:
                    answer = {"error": f"a request is one JSON object per line ({e})"}
                else:
                    answer = self._handle(req)
            conn.sendall(json.dumps(answer).encode() + b"\n")
        except OSError:
            pass  # the client went away: nothing to answer

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=5)


def _read_line(conn: socket.socket) -> bytes:
    buf = bytearray()
    while not buf.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        buf += chunk
        if len(buf) > _MAX_LINE:
            raise OSError("request too long")
    return bytes(buf)


def serve(coll: Any, lock: Any, about: dict[str, Any]) -> MapServer:
    """Serve ``coll``'s maps on ``@pyxdp-run-<our pid>``; ``about`` (program, interfaces)
    goes with the answer to ``show``; every map operation runs under ``lock``."""
    from pyxdp.cli import bpftool
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.bind(_address(os.getpid()))
        sock.listen(8)
        sock.settimeout(0.2)  # how soon close() is seen
    except OSError as e:
        sock.close()
        raise CliError(f"serving the maps on @{PREFIX}{os.getpid()}: {e.strerror}") from None

    def layout(m: Any) -> bpftool.ValueLayout:
        return bpftool.ValueLayout(m.spec.type, m.spec.value_size, m.nr_cpus, m.codec)

    def handle(req: dict[str, Any]) -> Any:
        op = req.get("op")
        if op == "show":
            return {**about, "maps": [
                {"name": n, "type": int(m.spec.type), "flags": int(m.spec.flags),
                 "bytes_key": m.spec.key_size, "bytes_value": m.spec.value_size,
                 "max_entries": m.spec.max_entries} for n, m in coll.maps.items()]}
        name = req.get("map")
        m = coll.maps.get(name) if isinstance(name, str) else None
        if m is None:
            return {"error": f"no map {name!r} (maps: {', '.join(coll.maps)})"}
        h = m.handle
        try:
            key = bytes.fromhex(req["key"]) if "key" in req else None
            value = bytes.fromhex(req["value"]) if "value" in req else None
            flags = int(req.get("flags", 0))
        except (TypeError, ValueError):
            return {"error": "key and value are hex strings, flags an integer"}
        for what, data, size in (("key", key, m.spec.key_size),
                                 ("value", value, m.spec.value_size)):
            if data is not None and len(data) != size:
                return {"error": f"the {what} has {len(data)} bytes; the map's {what} has "
                                 f"{size}"}
        try:
            with lock:
                if op == "dump":
                    out, cur = [], None
                    for _ in range(m.spec.max_entries + 1):
                        cur = h.get_next_key(cur)
                        if cur is None:
                            break
                        got = h.lookup(cur)
                        if got is not None:
                            out.append(bpftool.entry_doc(layout(m), cur, got))
                    return {"entries": out}
                if key is None:
                    return {"error": f"{op}: a key is needed"}
                if op == "lookup":
                    got = h.lookup(key)
                    if got is None:
                        return {"error": f"key {key.hex(' ')} not found"}
                    return {"entry": bpftool.entry_doc(layout(m), key, got)}
                if op == "update" and value is not None:
                    value = layout(m).update_value(value)
                    h.update(key, value, flags)
                    return {"ok": True}
                if op == "delete":
                    h.delete(key)
                    return {"ok": True}
        except PyxdpError as e:
            return {"error": str(e)}
        return {"error": f"unknown request {op!r}"}

    return MapServer(sock, handle)


def _request(pid: int, req: dict[str, Any], call: str) -> Any:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as s:
        s.settimeout(10.0)
        try:
            s.connect(_address(pid))
            s.sendall(json.dumps(req).encode() + b"\n")
            line = _read_line(s)
        except (ConnectionRefusedError, FileNotFoundError):
            raise CliError(f"{call}: no pyxdp run with pid {pid} in this network namespace "
                           "(pyxdp map show run lists them)") from None
        except OSError as e:
            raise CliError(f"{call}: {e.strerror or e}") from None
    try:
        answer = json.loads(line)
    except ValueError:
        raise CliError(f"{call}: pyxdp run {pid} gave no answer") from None
    if isinstance(answer, dict) and "error" in answer:
        raise CliError(f"{call}: {answer['error']}")
    return answer


def runs() -> list[int]:
    """The pids serving maps in this network namespace (``/proc/net/unix``'s
    ``@pyxdp-run-PID`` listeners)."""
    out = set()
    with contextlib.suppress(OSError), open("/proc/net/unix") as f:
        for line in f:
            path = line.split()[-1] if line.count(" ") >= 7 else ""
            if path.startswith("@" + PREFIX) and path[1 + len(PREFIX):].isdigit():
                out.add(int(path[1 + len(PREFIX):]))
    return sorted(out)


def _pid(token: str, call: str) -> int:
    try:
        pid = int(token)
    except ValueError:
        raise CliError(f"{call}: not a pid: {token!r}") from None
    if pid <= 0:
        raise CliError(f"{call}: not a pid: {token!r}")
    return pid


def cmd_run_map(verb: str, tokens: list[str]) -> int:
    """``map VERB run [PID [NAME [key DATA [value DATA [FLAG]]]]]``."""
    from pyxdp.cli import bpftool
    from pyxdp.uapi.bpf import BpfMapType
    call = " ".join(["map", verb, "run", *tokens[:2]])
    if verb == "show":
        if len(tokens) > 1:
            raise CliError(f"{call}: unexpected {' '.join(tokens[1:])!r} (map show run [PID])")
        pids = [_pid(tokens[0], call)] if tokens else runs()
        docs = [{"pid": p, **_request(p, {"op": "show"}, call)} for p in pids]
        if STYLE.json:
            emit(docs if not tokens else docs[0])
            return 0
        for d in docs:
            print(f"pyxdp run {d['pid']}: {d.get('program', '-')} on "
                  f"{', '.join(d.get('ifaces', [])) or '-'}")
            for m in d["maps"]:
                kind = bpftool.type_name(BpfMapType, "BPF_MAP_TYPE_", m["type"])
                print(f"\t{kind}  name {m['name']}  flags {m['flags']:#x}  key "
                      f"{m['bytes_key']}B  value {m['bytes_value']}B  max_entries "
                      f"{m['max_entries']}")
        return 0
    if len(tokens) < 2:
        raise CliError(f"{call}: which map? (map {verb} run PID NAME)")
    pid = _pid(tokens[0], call)
    req: dict[str, Any] = {"op": verb, "map": tokens[1]}
    rest = tokens[2:]
    if verb == "dump":
        if rest:
            raise CliError(f"{call}: unexpected {' '.join(rest)!r}")
        docs = _request(pid, req, call)["entries"]
        if STYLE.json:
            emit(docs)
        else:
            for d in docs:
                bpftool.print_entry(d)
            print(f"Found {len(docs)} element{'s' if len(docs) != 1 else ''}")
        return 0
    key, value, flags = bpftool.split_kv(rest, call, verb == "update")
    req["key"] = key.hex()
    if value is not None:
        req["value"], req["flags"] = value.hex(), flags
    answer = _request(pid, req, call)
    if verb == "lookup":
        if STYLE.json:
            emit(answer["entry"])
        else:
            bpftool.print_entry(answer["entry"])
    elif STYLE.json:
        emit({"pid": pid, "map": tokens[1], verb: True, "key": [f"0x{b:02x}" for b in key]})
    return 0


@contextlib.contextmanager
def serving(coll: Any, lock: Any, about: dict[str, Any]) -> Iterator[MapServer]:
    server = serve(coll, lock, about)
    try:
        yield server
    finally:
        server.close()
