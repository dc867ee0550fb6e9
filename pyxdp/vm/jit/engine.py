"""The LLVM side of the JIT: one ORC LLJIT per process, the optimisation pipeline, a cache.

llvmlite's bundled LLVM does all the work, so no system compiler or linker is
needed at run time: the lowered IR text is parsed, optimised by the new pass
manager's default pipeline at the requested level (none at level 0; for a
large module, and at :data:`QUICK`, a short BPF pipeline of its own), emitted
as an object image for the host CPU and linked by ORC into a JIT library of
its own. Each library is held by a resource tracker; when the last holder (a
program or a cache entry) goes, LLVM frees its machine code. A program lowered
as several modules (a long loop-free function split in parts, see
:func:`pyxdp.vm.jit.lower.split_parts`) has them parsed, optimised and emitted
at once, one thread each (each in an LLVM context and with a target machine of
its own, past llvmlite's process-wide lock: see :func:`_own_context`), and
their objects linked into one library.

Compiled code depends only on the bytecode, its layout, the resolved ld_imm64
values, the callback entry points, the native-helper specialisation (which
constant maps, their sizes and region places), the unchecked switch, the
accesses the verifier proved and the optimisation level; helpers, regions and
the budget are run-time data in the run context. That tuple is the cache key,
so reloading the same program costs a dictionary lookup.

Object code also persists across processes. LLVM's output for a module is kept
on disk keyed by the IR text, the optimisation level and the JIT's identity
(llvmlite and LLVM versions, target, CPU and its features); a single program's
is also kept under its inputs (the in-memory key above, plus a digest of
pyxdp's sources, which decide how inputs lower) with its exported symbols, so
a new process that loads the same program the same way (same bytes and map
places) neither lowers nor optimises it: it links the image (the IR is lowered
only if asked for). The IR names no host address (libc and the runtime
are imported symbols; map and packet addresses are pyxdp's fake ones, handed
out in creation order), so an object image is valid in any process.
``PYXDP_JIT_CACHE`` names the directory (default ``$XDG_CACHE_HOME/pyxdp/jit``,
else ``~/.cache/pyxdp/jit``); ``off`` turns the disk cache off (:mod:`pyxdp.diskcache`).

:func:`compile_together` collects the programs compiled inside it and links
them as one module when it exits (or when one of them is first run): LLVM's
fixed cost per module is then paid once, which is what makes thousands of
small random programs affordable in the differential tests.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import hashlib
import json
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llvmlite.binding as llvm  # type: ignore[import-untyped]

from pyxdp.asm.insn import encode
from pyxdp.diskcache import disk_cache_dir, load_sealed, sources_digest, store_sealed
from pyxdp.vm.jit.entry import runtime_module
from pyxdp.vm.jit.unit import LoweredModule, ProgramInput

__all__ = ["CACHE_SIZE", "DISK_CACHE_MAX", "QUICK", "CompiledProgram", "cache_clear",
           "compile_program", "compile_together", "disk_cache_dir", "native_function",
           "native_helper_address"]

CACHE_SIZE = 256

_LOCK = threading.RLock()
# C library functions native code may call: the clock, and what LLVM lowers large
# memset/memmove intrinsics to.
_LIBC = ("clock_gettime", "memset", "memmove", "memcpy")
# Bumped when what is stored (or how it is keyed) changes.
_DISK_FORMAT = 1
# Modules above this many lines of IR (about 1,800 eBPF instructions, where LLVM's
# default -O2 pipeline passes a second) are optimised by the BPF pipeline (see
# _bpf_passes) instead; below it the default pipeline's code is what the per-packet
# figures against Linux were measured with.
LARGE_MODULE_LINES = 10_000
QUICK = -1
"""The ``opt_level`` of a large program's first machine code on the tiered engine: the
BPF pipeline, then LLVM's fast code generator (FastISel, fast register allocation).
Its code runs as fast as -O2's with the fast code generator (what large programs got
before); -O2 (the same passes, then the optimising code generator: 2-3x faster code on
a 3,000-instruction program) replaces it, rebuilt from the same optimised IR."""
# The disk cache is trimmed (oldest first, once per process that writes) above this size.
DISK_CACHE_MAX = 256 << 20


class _Llvm:
    """Process-wide LLVM state: target machines by level, the JIT, the native helpers."""

    def __init__(self) -> None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.target = llvm.Target.from_triple(llvm.get_process_triple())
        self.cpu = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()
        self._machines: dict[tuple[int, int], Any] = {}
        _free_own_contexts()
        self.jit = llvm.create_lljit_compiler(self.machine(2))
        self._serial = 0
        # The latest modules the BPF pipeline optimised: (digest of their IR, bitcodes).
        self._optimised: tuple[bytes, list[bytes]] | None = None
        # The C library the interpreter process already has loaded.
        libc = ctypes.CDLL(None)
        self.libc = {name: ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
                     for name in _LIBC}
        import llvmlite
        self.identity = repr((_DISK_FORMAT, llvmlite.__version__, llvm.llvm_version_info,
                              llvm.get_process_triple(), self.cpu, self.features)).encode()
        runtime, _ = self.compile(runtime_module(), 2)
        builder = llvm.JITLibraryBuilder().add_object_img(runtime)
        for name, addr in self.libc.items():
            builder.import_symbol(name, addr)
        self.runtime = (builder.export_symbol("pyxdp_ktime_get_ns")
                        .export_symbol("pyxdp_batch")
                        .link(self.jit, "pyxdp_runtime"))

    def machine(self, level: int, slot: int = 0) -> Any:
        """The target machine for ``level``; one per compile thread (``slot``): LLVM's
        code generation may not share one between threads."""
        tm = self._machines.get((level, slot))
        if tm is None:
            # Position-independent, large code model: ORC may place each library anywhere.
            tm = self.target.create_target_machine(
                cpu=self.cpu, features=self.features, opt=min(level, 3), reloc="pic",
                codemodel="jitdefault", jit=True)
            self._machines[(level, slot)] = tm
        return tm

    def compile(self, ir_text: str, level: int) -> tuple[bytes, bool]:
        """The object image of ``ir_text`` optimised at ``level``, and whether it came
        from the disk cache."""
        objs, from_disk = self.compile_modules([ir_text], level)
        return objs[0], from_disk

    def compile_modules(self, texts: Sequence[str], level: int) -> tuple[list[bytes], bool]:
        """The object images of the modules ``texts`` (one program's parts, see
        :func:`pyxdp.vm.jit.lower.lower_modules`) optimised at ``level``, each on a
        thread of its own, and whether they came from the disk cache."""
        blob = b"\0".join(t.encode() for t in texts)
        key = hashlib.sha256(self.identity + _level_byte(level) + blob).digest()
        hit = _disk_get(key)
        if hit is not None:
            return _split_objects(hit[0], hit[1]), True
        bpf = level == QUICK or (level > 0 and sum(t.count("\n") for t in texts)
                                 > LARGE_MODULE_LINES)
        digest = hashlib.sha256(blob).digest()
        reuse = None
        if bpf and self._optimised is not None and self._optimised[0] == digest:
            reuse = self._optimised[1]  # the tiered engine's -O2 after QUICK: codegen only
        out: list[tuple[bytes, bytes | None] | BaseException | None] = [None] * len(texts)
        parallel = len(texts) > 1

        def build(k: int) -> None:
            try:
                if parallel:
                    with _own_context():
                        out[k] = self._build(texts[k], None if reuse is None else reuse[k],
                                             level, k, bpf)
                else:  # one module: under llvmlite's lock, as every other LLVM call
                    out[k] = self._build(texts[k], None if reuse is None else reuse[k],
                                         level, k, bpf)
            except BaseException as e:  # re-raised by the caller's thread
                out[k] = e

        # One build at a time in the process: a slot's target machine is never used by
        # two threads at once (the parts' threads pass llvmlite's lock by). While parts
        # build past that lock, no cyclic collection may run on their threads: it could
        # dispose another thread's LLVM objects (numba's, the global context's) unlocked.
        with _COMPILE:
            for k in range(len(texts)):
                self.machine(max(level, 0), k)
            collecting = parallel and gc.isenabled()
            if collecting:
                gc.disable()
            try:
                threads = [threading.Thread(target=build, args=(k,), name=f"pyxdp-llvm-{k}")
                           for k in range(1, len(texts))]
                for t in threads:
                    t.start()
                build(0)
                for t in threads:
                    t.join()
            finally:
                if collecting:
                    gc.enable()
        results: list[tuple[bytes, bytes | None]] = []
        for r in out:
            if isinstance(r, BaseException):
                raise r
            assert r is not None
            results.append(r)
        if bpf and reuse is None:
            self._optimised = (digest, [bc or b"" for _, bc in results])
        objs = [obj for obj, _ in results]
        _disk_put(key, {"sizes": [len(o) for o in objs]}, b"".join(objs))
        return objs, False

    def _build(self, ir_text: str, bitcode: bytes | None, level: int, slot: int, bpf: bool
               ) -> tuple[bytes, bytes | None]:
        """One module's object image (and its optimised bitcode, after the BPF pipeline),
        in an LLVM context of its own with a target machine of the thread's slot."""
        tm = self.machine(max(level, 0), slot)
        # The module goes before its context, here, whatever happens: left to the
        # garbage collector (a failed build's traceback holds this frame in a cycle),
        # the context could be disposed first and the module's disposal then reads
        # freed memory.
        ctx = llvm.create_context()
        mod = None
        try:
            if bitcode is not None:
                mod = llvm.parse_bitcode(bitcode, context=ctx)
                return bytes(tm.emit_object(mod)), None
            mod = llvm.parse_assembly(ir_text, context=ctx)
            mod.verify()
            mod.triple = llvm.get_process_triple()
            mod.data_layout = str(tm.target_data)
            optimised = None
            if bpf:
                _bpf_passes(mod, tm)
                optimised = mod.as_bitcode()
            elif level > 0:
                pto = llvm.create_pipeline_tuning_options(speed_level=level)
                pb = llvm.create_pass_builder(tm, pto)
                pb.getModulePassManager().run(mod, pb)
            return bytes(tm.emit_object(mod)), optimised
        finally:
            if mod is not None:
                mod.close()
            ctx.close()

    def link(self, ir_text: str, exports: Sequence[str], level: int
             ) -> tuple[Any, float, bool]:
        """Optimise and link ``ir_text``; return the tracker, the milliseconds spent and
        whether the object came from the disk cache."""
        t0 = time.perf_counter()
        obj, from_disk = self.compile(ir_text, level)
        return self.link_object(obj, exports), (time.perf_counter() - t0) * 1e3, from_disk

    def link_object(self, obj: bytes | Sequence[bytes], exports: Sequence[str]) -> Any:
        """Link object images (one program's modules) into a library of their own; its
        resource tracker."""
        self._serial += 1
        builder = llvm.JITLibraryBuilder()
        for img in [obj] if isinstance(obj, bytes) else obj:
            builder.add_object_img(img)
        for name, addr in self.libc.items():
            builder.import_symbol(name, addr)
        for name in exports:
            builder.export_symbol(name)
        return builder.link(self.jit, f"pyxdp_prog_{self._serial}")

    def program_key(self, input_key: bytes, level: int) -> bytes:
        """The disk key of a program by its inputs (before lowering): they decide the
        IR only together with the code that lowers them, so pyxdp's sources are in it."""
        return hashlib.sha256(self.identity + sources_digest() + _level_byte(level)
                              + input_key).digest()


# llvmlite serialises every call into LLVM on one process-wide lock, for its global
# context; LLVM itself compiles modules of separate contexts on separate threads (what
# ORC's concurrent compilation does). A thread inside _own_context touches only objects
# of its own context and target machine, so it passes the lock by; everyone else still
# takes it.
_OWN = threading.local()
_COMPILE = threading.Lock()  # one compile_modules build phase at a time (see there)


class _OwnContextLock:
    """llvmlite's lock, but not for a thread inside :func:`_own_context`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def acquire(self) -> None:
        if not getattr(_OWN, "on", False):
            self.inner.acquire()

    def release(self) -> None:
        if not getattr(_OWN, "on", False):
            self.inner.release()


def _free_own_contexts() -> None:
    from llvmlite.binding import ffi

    # llvmlite's private lock object: a release without it keeps the lock as it is, and
    # the parts then compile one after another (correct, only slower)
    lock: Any = getattr(ffi.lib, "_lock", None)
    inner = getattr(lock, "_lock", None)
    if inner is not None and not isinstance(inner, _OwnContextLock):
        lock._lock = _OwnContextLock(inner)


@contextmanager
def _own_context() -> Iterator[None]:
    _OWN.on = True
    try:
        yield
    finally:
        _OWN.on = False


def _split_objects(meta: dict[str, Any], blob: bytes) -> list[bytes]:
    """The object images stored one after another (``meta["sizes"]``)."""
    sizes = meta.get("sizes") or [len(blob)]
    out, at = [], 0
    for n in sizes:
        out.append(blob[at:at + n])
        at += n
    return out


def _bpf_passes(mod: Any, tm: Any) -> None:
    """The BPF pipeline: what pays off on lowered eBPF, in one pass over the module.

    LLVM's default -O2 pipeline runs instruction combining eight times, GVN,
    correlated value propagation, jump threading and the loop and vectorising passes
    over what is, for eBPF, one large function of short blocks and no loops to speak
    of: 1.7-3.7 s of a 3,000-instruction program's build for code no faster than
    this pipeline's (measured per packet on that program and on a load balancer of
    2,600 instructions). Here what the call sites say ``alwaysinline`` is inlined (a
    small program into its batch loop), then instruction combining, CFG simplification
    and one global value numbering (the region table's words loaded once, not per
    access): 0.5-0.9 s.
    """
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(0))
    mpm = llvm.create_new_module_pass_manager()
    mpm.add_always_inliner_pass()
    mpm.add_global_dead_code_eliminate_pass()
    mpm.add_instruction_combine_pass()
    mpm.add_simplify_cfg_pass()
    mpm.add_new_gvn_pass()
    mpm.add_simplify_cfg_pass()
    mpm.run(mod, pb)


def _level_byte(level: int) -> bytes:
    return level.to_bytes(1, "little", signed=True)  # O0-O3 as before; QUICK is 0xff


_META = struct.Struct("<I")  # metadata length, after the seal (pyxdp.diskcache.store_sealed)


def _disk_get(key: bytes) -> tuple[dict[str, Any], bytes] | None:
    """Metadata and object image stored under ``key``; None when absent, damaged or
    written for another key (LLVM must never see a damaged or another program's image)."""
    where = disk_cache_dir()
    body = load_sealed(where / f"{key.hex()}.o", key) if where is not None else None
    if body is None or len(body) < _META.size:
        return None
    (meta_len,) = _META.unpack_from(body)
    if _META.size + meta_len > len(body):
        return None
    try:
        meta = json.loads(body[_META.size:_META.size + meta_len])
    except (ValueError, RecursionError):
        return None
    return (meta, body[_META.size + meta_len:]) if isinstance(meta, dict) else None


# Whether this process has trimmed the disk cache: on its first write, not at start (a
# process that only reads images never trims; a listing of a cache of 9,000 images took
# 0.08 s of CPU and 0.35 s of wall time).
_TRIMMED = False


def _disk_put(key: bytes, meta: dict[str, Any], obj: bytes) -> None:
    global _TRIMMED
    where = disk_cache_dir()
    if where is None:
        return
    raw = json.dumps(meta).encode()
    store_sealed(where / f"{key.hex()}.o", key, _META.pack(len(raw)) + raw + obj)
    if not _TRIMMED:
        _TRIMMED = True
        _trim(where)


def _trim(where: Path | None) -> None:
    """Keep the disk cache under :data:`DISK_CACHE_MAX`: drop the least recently
    written images down to three quarters of it."""
    if where is None:
        return
    try:
        files = [(st.st_mtime, st.st_size, p) for p in where.glob("*.o")
                 for st in [p.stat()]]
    except OSError:
        return
    total = sum(size for _, size, _ in files)
    if total <= DISK_CACHE_MAX:
        return
    for _, size, p in sorted(files):
        if total <= DISK_CACHE_MAX * 3 // 4:
            break
        try:
            p.unlink()
        except OSError:
            continue
        total -= size


_STATE: _Llvm | None = None


def _llvm() -> _Llvm:
    global _STATE
    with _LOCK:
        if _STATE is None:
            _STATE = _Llvm()
        return _STATE


def native_helper_address(symbol: str) -> int:
    """Address of a shared native function (``pyxdp_ktime_get_ns``, ``pyxdp_batch``)."""
    return int(_llvm().runtime[symbol])


# Native functions the layers above lower for their own native code, by IR text: the
# library (kept for the life of the process) and the function's address.
_FUNCTIONS: dict[str, tuple[Any, int]] = {}


def native_function(ir_text: str, symbol: str) -> int:
    """Address of ``symbol``, a function of the module ``ir_text`` lowered by a layer
    above (the maps' hash probe for the native poll loop): compiled once per process,
    from the disk cache when it has it, and never freed."""
    with _LOCK:
        hit = _FUNCTIONS.get(ir_text)
        if hit is None:
            tracker, _, _ = _llvm().link(ir_text, [symbol], 2)
            hit = _FUNCTIONS[ir_text] = (tracker, int(tracker[symbol]))
        return hit[1]


@dataclass(eq=False)
class CompiledProgram:
    """Native entry points of one program; valid while this object is alive.

    ``lower_ms`` is the time spent building IR in Python, ``llvm_ms`` the time
    LLVM spent optimising, generating and linking machine code (for programs
    compiled together: the module's time, shared; for an image from the disk cache:
    the time to read and link it). Inside
    :func:`compile_together` the addresses are filled in when the group is
    linked; :meth:`ready` links it early.
    """

    lower_ms: float
    ir: str
    _lowered: LoweredModule
    _group: _Group | None = field(default=None, repr=False)
    llvm_ms: float = 0.0
    from_disk: bool = False  # the object image came from the disk cache
    opt_level: int = 2  # what it was optimised with (QUICK asked for may give -O2 code)
    _input: ProgramInput | None = field(default=None, repr=False)
    entry: int = 0
    xdp_entry: int = 0
    callbacks: dict[int, int] = field(default_factory=dict)
    _tracker: Any = field(default=None, repr=False)

    @property
    def compile_ms(self) -> float:
        return self.lower_ms + self.llvm_ms

    def ir_text(self) -> str:
        """The LLVM IR (lowered now for a program linked from the disk cache)."""
        if not self.ir and self._input is not None:
            from pyxdp.vm.jit.lower import lower_many

            self.ir = lower_many([self._input])[0]
        return self.ir

    def ready(self) -> CompiledProgram:
        """Make sure the machine code exists (links a pending group now)."""
        if self._tracker is None and self._group is not None:
            self._group.link()
        return self

    def _resolve(self, tracker: Any, llvm_ms: float, from_disk: bool) -> None:
        low = self._lowered
        self._tracker = tracker
        self.llvm_ms = llvm_ms
        self.from_disk = from_disk
        self.entry = int(tracker[low.entry]) if low.entry else 0
        self.xdp_entry = int(tracker[low.xdp_entry]) if low.xdp_entry else 0
        self.callbacks = {pc: int(tracker[sym]) for pc, sym in low.callbacks.items()}
        self._group = None


class _Group:
    """Programs waiting to be linked as one module."""

    def __init__(self, opt_level: int) -> None:
        self.opt_level = opt_level
        self.inputs: list[ProgramInput] = []
        self.programs: list[CompiledProgram] = []

    def link(self) -> None:
        with _LOCK:
            if not self.programs:
                return
            inputs, programs = self.inputs, self.programs
            self.inputs, self.programs = [], []
            from pyxdp.vm.jit.lower import lower_many

            text, lowered = lower_many(inputs)
            exports = [s for low in lowered
                       for s in [low.entry, low.xdp_entry, *low.callbacks.values()] if s]
            tracker, llvm_ms, from_disk = _llvm().link(text, exports, self.opt_level)
            for prog, low in zip(programs, lowered, strict=True):
                prog._lowered = low
                prog._resolve(tracker, llvm_ms, from_disk)


# The latest program lowered on its own: the tiered engine's -O2 build of a program
# follows its QUICK one, with the same input.
_LOWERED: tuple[ProgramInput, list[str], LoweredModule] | None = None


def _compile_one(p: ProgramInput, key: bytes, level: int) -> CompiledProgram:
    """One program: linked from the disk cache by its inputs without lowering it, or
    lowered, compiled (or its IR's image found) and stored by its inputs too."""
    jit = _llvm()
    disk_key = jit.program_key(key, level)
    t0 = time.perf_counter()
    hit = _disk_get(disk_key)
    if hit is not None:
        meta, blob = hit
        low = LoweredModule("", meta["entry"], meta["xdp_entry"],
                            {int(pc): sym for pc, sym in meta["callbacks"].items()})
        prog = CompiledProgram(0.0, "", low, _input=p, opt_level=level)
        tracker = jit.link_object(_split_objects(meta, blob), _exports(low))
        prog._resolve(tracker, (time.perf_counter() - t0) * 1e3, True)
        return prog
    # A miss: the lowering (the JIT's largest module) loads with the first one, so a
    # process whose programs all come from the disk cache never loads it.
    from pyxdp.vm.jit.lower import lower_modules

    global _LOWERED
    if _LOWERED is not None and _LOWERED[0] == p:
        texts, low = _LOWERED[1], _LOWERED[2]
    else:
        texts, low = lower_modules(p)
        _LOWERED = (p, texts, low)
    lower_ms = (time.perf_counter() - t0) * 1e3
    # A split program's IR as one module is lowered again if asked for (ir_text).
    prog = CompiledProgram(lower_ms, texts[0] if len(texts) == 1 else "", low,
                           _input=p, opt_level=level)
    obj, from_disk = jit.compile_modules(texts, level)
    t1 = time.perf_counter()
    tracker = jit.link_object(obj, _exports(low))
    llvm_ms = (time.perf_counter() - t1) * 1e3 + (t1 - t0) * 1e3 - lower_ms
    prog._resolve(tracker, llvm_ms, from_disk)
    _disk_put(disk_key, {"entry": low.entry, "xdp_entry": low.xdp_entry,
                         "callbacks": {str(pc): s for pc, s in low.callbacks.items()},
                         "sizes": [len(o) for o in obj]}, b"".join(obj))
    return prog


def _exports(low: LoweredModule) -> list[str]:
    return [s for s in (low.entry, low.xdp_entry) if s] + list(low.callbacks.values())


_CACHE: OrderedDict[bytes, CompiledProgram] = OrderedDict()
_GROUPS = threading.local()


def cache_clear() -> None:
    with _LOCK:
        _CACHE.clear()


@contextmanager
def compile_together(opt_level: int | None = None) -> Iterator[None]:
    """Programs compiled inside this block (with ``opt_level``, when given, instead of
    their own) are linked as one LLVM module when it ends."""
    stack: list[tuple[_Pending, int | None]] = getattr(_GROUPS, "stack", [])
    _GROUPS.stack = stack
    groups: dict[int, _Group] = {}
    stack.append((_Pending(groups), opt_level))
    try:
        yield
    finally:
        stack.pop()
        for g in groups.values():
            g.link()


class _Pending:
    """The groups of one :func:`compile_together` block, by optimisation level."""

    def __init__(self, groups: dict[int, _Group]) -> None:
        self.groups = groups

    def group(self, level: int) -> _Group:
        g = self.groups.get(level)
        if g is None:
            g = self.groups[level] = _Group(level)
        return g


def _input_digest(p: ProgramInput) -> bytes:
    """What decides a program's IR (its symbols' tag too): the same at every level."""
    h = hashlib.sha256(encode(p.insns))
    h.update(repr((p.layout.functions, sorted(p.imm64.items()), sorted(p.ctx_loads.items()),
                   sorted(p.callbacks), p.natives, p.unsafe, p.emit_run,
                   sorted(p.proven.items()), p.exception_cb, p.min_budget)).encode())
    return h.digest()


def _program_key(digest: bytes, opt_level: int) -> bytes:
    return hashlib.sha256(digest + _level_byte(opt_level)).digest()


def _disk_has(key: bytes) -> bool:
    where = disk_cache_dir()
    return where is not None and (where / f"{key.hex()}.o").is_file()


def compile_program(p: ProgramInput, *, opt_level: int = 2) -> tuple[CompiledProgram, bool]:
    """Machine code for a validated program, from the cache when possible.

    ``p.tag`` is ignored (the cache key names the symbols). Returns the
    program and whether it came from the cache.
    """
    stack: list[tuple[_Pending, int | None]] | None = getattr(_GROUPS, "stack", None)
    pending: _Pending | None = None
    if stack:
        pending, level = stack[-1]
        if level is not None:
            opt_level = level
    digest = _input_digest(p)
    key = _program_key(digest, opt_level)
    with _LOCK:
        if opt_level == QUICK and pending is None:
            # -O2 code built before (in this process or, on disk, in another) is as quick
            # to have and faster to run.
            o2 = _program_key(digest, 2)
            if o2 in _CACHE or _disk_has(_llvm().program_key(o2, 2)):
                key, opt_level = o2, 2
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit, True
        # One tag at every level: the tiered engine's builds lower to the same IR text
        # (lowered once, optimised once; see _compile_one and _Llvm.compile).
        tag = "p" + digest[:10].hex()
        p = dataclasses.replace(p, tag=tag)
        if pending is not None:
            group = pending.group(opt_level)
            prog = CompiledProgram(0.0, "", LoweredModule("", None, None, {}), group,
                                   opt_level=opt_level)
            group.inputs.append(p)
            group.programs.append(prog)
        else:
            prog = _compile_one(p, key, opt_level)
        _CACHE[key] = prog
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
        return prog, False
