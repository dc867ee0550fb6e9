"""Small XDP programs with Linux 6.18's verdict on each: the verifier's differential corpus.

Each :class:`VerifierCase` is assembler text (the kernel's dialect) and the
verdict Linux gave when root loaded it, measured with BPF_PROG_LOAD on this
machine: ``None`` for accepted, else the last line of the verifier's log and
the errno (``err``, EACCES unless the case says otherwise).
``tests/test_verifier.py`` holds pyxdp's verifier to every verdict and
``tests/kernel/test_verifier_kernel.py`` re-measures Linux's.

``MAP(name)`` in an ``ld_imm64`` loads one of :data:`MAPS` (``MAP_VALUE(name, off)``
the address ``off`` bytes into its value, BPF_PSEUDO_MAP_VALUE); ``call KFUNC(name)``
calls kernel function ``name`` (resolved by name at load, as libbpf does);
``rX = KSYM(name)`` loads the address of kernel function or variable ``name`` (an
``ld_imm64`` of its id in the kernel's BTF, as libbpf resolves a ``__ksym``). A
case with ``funcs`` gets BTF and func_info, one :class:`Func` per function in
order (the main program first), as clang emits them.
"""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass, replace

from pyxdp.asm.assembler import assemble
from pyxdp.asm.insn import Instruction
from pyxdp.asm.validate import validate
from pyxdp.btf.btf import (
    BTF_INT_SIGNED,
    Btf,
    BtfArray,
    BtfKind,
    BtfMember,
    BtfParam,
    BtfType,
)
from pyxdp.btf.vmlinux import core_target
from pyxdp.spec import (
    BPF_F_RDONLY_PROG,
    BPF_F_WRONLY_PROG,
    BPF_XDP,
    BPF_XDP_DEVMAP,
    CollectionSpec,
    FuncInfo,
    KfuncRef,
    MapRef,
    MapSpec,
    ProgramSpec,
)
from pyxdp.uapi.bpf import BpfMapType as MT

__all__ = ["CASES", "LOOPS2_WALKS", "MAPS", "Func", "VerifierCase", "funcs_btf"]

# The strings of the rodata map, at offsets 0, 16, 32, 48 and (not NUL-terminated) 54.
RODATA = (b"user.pyxdp".ljust(16, b"\0") + b"user.none".ljust(16, b"\0") +
          b"trusted.pyxdp".ljust(16, b"\0") + b"user.\0" + b"useruseruu")
MAPS: dict[str, MapSpec] = {
    "hash": MapSpec("hash", MT.BPF_MAP_TYPE_HASH, 4, 8, 16),
    "arr": MapSpec("arr", MT.BPF_MAP_TYPE_ARRAY, 4, 16, 4),
    "rb": MapSpec("rb", MT.BPF_MAP_TYPE_RINGBUF, 0, 0, 4096),
    "dev": MapSpec("dev", MT.BPF_MAP_TYPE_DEVMAP, 4, 4, 4),
    "progs": MapSpec("progs", MT.BPF_MAP_TYPE_PROG_ARRAY, 4, 4, 4),
    "cpus": MapSpec("cpus", MT.BPF_MAP_TYPE_CPUMAP, 4, 4, 2),
    # value struct { int cnt; struct bpf_spin_lock lock; int x; }: its BTF comes with the case
    "locked": MapSpec("locked", MT.BPF_MAP_TYPE_ARRAY, 4, 12, 2),
    # value struct { long x; struct bpf_timer t; }: its BTF comes with the case
    "timed": MapSpec("timed", MT.BPF_MAP_TYPE_ARRAY, 4, 24, 2),
    # value struct { long x; struct bpf_wq w; }: its BTF comes with the case
    "queued": MapSpec("queued", MT.BPF_MAP_TYPE_ARRAY, 4, 24, 2),
    "hqueued": MapSpec("hqueued", MT.BPF_MAP_TYPE_HASH, 4, 24, 2),
    # read-only global data (libbpf's frozen .rodata): MAP(rodata) is a pointer to its value
    "rodata": MapSpec("rodata", MT.BPF_MAP_TYPE_ARRAY, 4, len(RODATA), 1,
                      flags=BPF_F_RDONLY_PROG, contents=((bytes(4), RODATA),), frozen=True),
    # value struct { long x; struct bpf_task_work tw; }: its BTF comes with the case
    "tasked": MapSpec("tasked", MT.BPF_MAP_TYPE_ARRAY, 4, 16, 2),
    "htasked": MapSpec("htasked", MT.BPF_MAP_TYPE_HASH, 4, 16, 2),
    # value struct { long x; struct prog_test_ref_kfunc __kptr_untrusted *unref;
    # struct prog_test_ref_kfunc __kptr *ref; } (a kernel struct): its BTF comes with the case
    "kptrs": MapSpec("kptrs", MT.BPF_MAP_TYPE_ARRAY, 4, 24, 1),
    # a user ring buffer (bpf_user_ringbuf_drain's)
    "urb": MapSpec("urb", MT.BPF_MAP_TYPE_USER_RINGBUF, 0, 0, 4096),
    # a stack trace map (bpf_get_stackid's): no helper of XDP's may take it
    "stacks": MapSpec("stacks", MT.BPF_MAP_TYPE_STACK_TRACE, 4, 8, 2),
    # an array programs may only write (BPF_F_WRONLY_PROG)
    "wo": MapSpec("wo", MT.BPF_MAP_TYPE_ARRAY, 4, 8, 1, flags=BPF_F_WRONLY_PROG),
    # a frozen, program-read-only array (as .rodata is) holding a format and, from offset
    # 8, eight bytes without a NUL
    "fmts": MapSpec("fmts", MT.BPF_MAP_TYPE_ARRAY, 4, 16, 1, flags=BPF_F_RDONLY_PROG,
                    frozen=True, contents=((b"\0\0\0\0", b"s %d\n\0\0\0" + b"x" * 8),)),
    # a bloom filter of 8-byte values (bpf_map_peek_elem tests membership)
    "bloom": MapSpec("bloom", MT.BPF_MAP_TYPE_BLOOM_FILTER, 0, 8, 16),
}
_BTF_MAPS = ("locked", "timed", "queued", "hqueued", "tasked", "htasked", "kptrs")
# Maps whose MAP(name) is the address of their value (BPF_PSEUDO_MAP_VALUE, as libbpf
# refers to .rodata); every other MAP(name) is the map itself.
_DIRECT = frozenset({"rodata"})
_MARK = re.compile(r"MAP(_VALUE)?\((\w+)(?:,\s*(-?\d+))?\)")
_KFUNC = re.compile(r"KFUNC\((\w+)\)")
_KSYM = re.compile(r"KSYM\((\w+)\)")
_TAG = 0x5EED0000
_ENOTSUPP = 524  # the kernel-internal errno BPF_PROG_LOAD passes on


@dataclass(frozen=True)
class Func:
    """One function's BTF: its name, whether it is global (non-static), its arguments
    (``"int"``, ``"ctx"`` for ``struct xdp_md *``, ``"mem:N"`` for a pointer to N bytes,
    ``"dynptr"`` for ``struct bpf_dynptr *``, ``"struct:NAME"`` for ``struct NAME *``,
    ``"void*"``; ``@tag`` after one adds the
    ``arg:tag`` decl tag, as ``__arg_ctx``, ``__arg_nonnull``... do) and its return type
    (``"int"`` or ``"void"``)."""

    name: str
    is_global: bool = False
    args: tuple[str, ...] = ()
    ret: str = "int"


def funcs_btf(funcs: tuple[Func, ...]) -> tuple[Btf, tuple[int, ...], int, dict[str, int]]:
    """BTF for ``funcs``: each one's FUNC type id, then the id of ``int`` and those of
    the value structs of the maps with special fields (``locked``, ``timed``,
    ``queued``, ``hqueued``, ``tasked``, ``htasked``, ``kptrs``)."""
    strings = bytearray(b"\0")

    def name(text: str) -> int:
        if not text:
            return 0
        off = len(strings)
        strings.extend(text.encode() + b"\0")
        return off

    types: list[BtfType] = [BtfType(0, BtfKind.UNKN, "", 0)]

    def add(kind: BtfKind, text: str = "", **kw: object) -> int:
        types.append(BtfType(len(types), kind, text, name(text), **kw))  # type: ignore[arg-type]
        return len(types) - 1

    int_id = add(BtfKind.INT, "int", size_type=4, int_encoding=BTF_INT_SIGNED, int_bits=32)
    ctx_id = add(BtfKind.PTR, size_type=add(BtfKind.STRUCT, "xdp_md", size_type=24))
    void_ptr = add(BtfKind.PTR, size_type=0)
    u64_id = add(BtfKind.INT, "unsigned long long", size_type=8, int_bits=64)
    dynptr_ptr = add(BtfKind.PTR, size_type=add(
        BtfKind.STRUCT, "bpf_dynptr", size_type=16,
        members=(BtfMember("__opaque", name("__opaque"),
                           add(BtfKind.ARRAY, array=BtfArray(u64_id, int_id, 2)), 0),)))
    lock = add(BtfKind.STRUCT, "bpf_spin_lock", size_type=4,
               members=(BtfMember("val", name("val"), int_id, 0),))
    locked = add(BtfKind.STRUCT, "locked_val", size_type=12,
                 members=(BtfMember("cnt", name("cnt"), int_id, 0),
                          BtfMember("lock", name("lock"), lock, 32),
                          BtfMember("x", name("x"), int_id, 64)))
    long_id = add(BtfKind.INT, "long", size_type=8, int_encoding=BTF_INT_SIGNED, int_bits=64)
    timer = add(BtfKind.STRUCT, "bpf_timer", size_type=16,
                members=(BtfMember("a", name("a"), long_id, 0),
                         BtfMember("b", name("b"), long_id, 64)))
    timed = add(BtfKind.STRUCT, "timed_val", size_type=24,
                members=(BtfMember("x", name("x"), long_id, 0),
                         BtfMember("t", name("t"), timer, 64)))
    wq = add(BtfKind.STRUCT, "bpf_wq", size_type=16,
             members=(BtfMember("a", name("a"), long_id, 0),
                      BtfMember("b", name("b"), long_id, 64)))
    queued = add(BtfKind.STRUCT, "queued_val", size_type=24,
                 members=(BtfMember("x", name("x"), long_id, 0),
                          BtfMember("w", name("w"), wq, 64)))
    task_work = add(BtfKind.STRUCT, "bpf_task_work", size_type=8,
                    members=(BtfMember("a", name("a"), long_id, 0),))
    tasked = add(BtfKind.STRUCT, "tasked_val", size_type=16,
                 members=(BtfMember("x", name("x"), long_id, 0),
                          BtfMember("tw", name("tw"), task_work, 64)))
    # a kernel struct's name (Linux finds its layout in its own BTF)
    ref_kfunc = add(BtfKind.STRUCT, "prog_test_ref_kfunc", size_type=8,
                    members=(BtfMember("a", name("a"), long_id, 0),))
    kptrs = add(BtfKind.STRUCT, "kptrs_val", size_type=24, members=(
        BtfMember("x", name("x"), long_id, 0),
        BtfMember("unref", name("unref"), add(BtfKind.PTR, size_type=add(
            BtfKind.TYPE_TAG, "kptr_untrusted", size_type=ref_kfunc)), 64),
        BtfMember("ref", name("ref"), add(BtfKind.PTR, size_type=add(
            BtfKind.TYPE_TAG, "kptr", size_type=ref_kfunc)), 128)))
    ids = []
    for f in funcs:
        params = []
        tags: list[tuple[int, str]] = []
        for n, arg in enumerate(f.args):
            a, *more = arg.split("@")
            tags.extend((n, tag) for tag in more)
            if a == "int":
                t = int_id
            elif a == "ctx":
                t = ctx_id
            elif a == "void*":
                t = void_ptr
            elif a == "dynptr":
                t = dynptr_ptr
            elif a.startswith("struct:"):  # a pointer to a (kernel) struct of that name
                t = add(BtfKind.PTR, size_type=add(BtfKind.STRUCT, a[7:], size_type=8))
            else:
                size = int(a.split(":")[1])
                t = add(BtfKind.PTR, size_type=add(BtfKind.STRUCT, f"buf{size}",
                                                   size_type=size))
            params.append(BtfParam(f"a{n}", 0, t))
        named = tuple(BtfParam(p.name, name(p.name), p.type) for p in params)
        proto = add(BtfKind.FUNC_PROTO, size_type=int_id if f.ret == "int" else 0,
                    vlen=len(named), params=named)
        ids.append(add(BtfKind.FUNC, f.name, size_type=proto, linkage=int(f.is_global)))
        for n, tag in tags:
            add(BtfKind.DECL_TAG, f"arg:{tag}", size_type=ids[-1], component_idx=n)
    return Btf(types=tuple(types), strings=bytes(strings)), tuple(ids), int_id, {
        "locked": locked, "timed": timed, "queued": queued, "hqueued": queued,
        "tasked": tasked, "htasked": tasked, "kptrs": kptrs}


def _ksym_id(m: re.Match[str]) -> str:
    """``btf_id[N]``: the id of kernel FUNC or VAR ``m[1]`` in the kernel's BTF."""
    kernel = core_target()
    for tid in kernel.find_all(m.group(1)):
        if kernel.type_by_id(tid).kind in (BtfKind.FUNC, BtfKind.VAR):
            return f"btf_id[{tid}]"
    raise ValueError(f"kernel symbol {m.group(1)!r} is not in the kernel's BTF")


@dataclass(frozen=True)
class VerifierCase:
    name: str
    asm: str
    linux: str | None  # None: accepted; else the last line of Linux's log
    devmap: bool = False
    license: str = "GPL"
    bound: bool = False  # device-bound, as the XDP metadata kfuncs require
    funcs: tuple[Func, ...] = ()
    flags: int = 0  # prog_flags (BPF_F_STRICT_ALIGNMENT is 1)
    err: int = errno.EACCES  # the errno of Linux's refusal (unused when accepted)
    processed: int = 0  # accepted: Linux's "processed N insns", where the walk is pinned
    syscall: bool = False  # a SEC("syscall") program (give flags=BPF_F_SLEEPABLE, as libbpf)
    # (pc, field, value): fields set in the assembled instructions, for the encodings the
    # assembler will not write (reserved fields, unknown opcodes)
    raw: tuple[tuple[int, str, int], ...] = ()

    @property
    def errno(self) -> int:
        """The errno BPF_PROG_LOAD fails with, 0 when Linux accepts the case."""
        return 0 if self.linux is None else self.err

    def spec(self, ifindex: int = 1) -> CollectionSpec:
        """The case as a collection; a ``bound`` case is bound to device ``ifindex``."""
        names: list[str] = []
        offsets: dict[int, int] = {}  # MAP_VALUE's: offset by index in names

        def mark(m: re.Match[str]) -> str:
            if m.group(1):
                offsets[len(names)] = int(m.group(3) or 0)
            names.append(m.group(2))
            return f"{_TAG + len(names) - 1:#x} ll"

        kfuncs: list[str] = []

        def kmark(m: re.Match[str]) -> str:
            kfuncs.append(m.group(1))
            return f"kernel-function#{len(kfuncs) - 1}"

        asm = _KSYM.sub(_ksym_id, _KFUNC.sub(kmark, _MARK.sub(mark, self.asm)))
        insns = list(assemble(asm))
        for pc, field, value in self.raw:
            insns[pc] = replace(insns[pc], **{field: value})
        krefs = tuple(KfuncRef(pc, kfuncs[i.imm]) for pc, i in enumerate(insns)
                      if i.code == 0x85 and i.src == 2)
        refs = []
        for pc, i in enumerate(insns):
            if i.is_ld_imm64() and i.imm & ~0xFF == _TAG and insns[pc + 1].imm == 0:
                name = names[i.imm - _TAG]
                if i.imm - _TAG in offsets:
                    refs.append(MapRef(pc, name, "value", offsets[i.imm - _TAG]))
                else:
                    refs.append(MapRef(pc, name, "value" if name in _DIRECT else "fd"))
                insns[pc] = Instruction(i.code, i.dst, 0, 0, 0)
        section = "syscall" if self.syscall else "xdp/devmap" if self.devmap else "xdp"
        attach = 0 if self.syscall else BPF_XDP_DEVMAP if self.devmap else BPF_XDP
        prog = ProgramSpec(name=self.name[:15], section=section, insns=tuple(insns),
                           license=self.license, map_refs=tuple(refs),
                           prog_type="syscall" if self.syscall else "xdp",
                           expected_attach_type=attach, kfuncs=krefs, flags=self.flags)
        btf = None
        maps = {n: MAPS[n] for n in names}
        if self.funcs or any(m in maps for m in _BTF_MAPS):
            btf, ids, int_id, values = funcs_btf(self.funcs)
            for m in _BTF_MAPS:
                if m in maps:
                    maps[m] = replace(maps[m], key_type=int_id, value_type=values[m])
        if self.funcs:
            # callbacks (ld_imm64 of a function) are functions too, as add_subprog has them
            # kfunc calls laid out as calls, LD_ABS/LD_IND (pyxdp's ISA has none) as moves
            plain = [replace(i, src=0, imm=0) if i.code == 0x85 and i.src == 2 else
                     Instruction(0xB7, 0, 0, 0, 0) if i.code & 7 == 0 and i.code & 0xE0 in
                     (0x20, 0x40) else i for i in insns]
            starts = sorted({a for a, _ in validate(plain, recursion=True).functions} | {
                pc + 1 + i.imm for pc, i in enumerate(insns)
                if i.is_ld_imm64() and i.src == 4})
            if len(starts) != len(self.funcs):
                raise ValueError(f"{self.name}: {len(starts)} functions, {len(self.funcs)} "
                                 "described")
            prog = prog.copy(func_info=tuple(FuncInfo(pc, tid, f.name) for pc, tid, f in
                                             zip(starts, ids, self.funcs, strict=True)))
        if self.bound:
            prog = prog.bound_to(ifindex)
        return CollectionSpec(programs={prog.name: prog}, maps=maps, license=self.license,
                              name=self.name, btf=btf)


# data in r2, data_end in r3
_PKT = "r2 = *(u32 *)(r1 +0)\nr3 = *(u32 *)(r1 +4)\n"
# r6 and r7: two lookups of key 0 in hash, r6 NULL-checked (jumps to out when NULL)
_TWO = ("r1 = 0\n*(u32 *)(r10 -8) = r1\nr9 = r10\nr9 += -8\n"
        "r1 = MAP(hash)\nr2 = r9\ncall 1\nr6 = r0\n"
        "r1 = MAP(hash)\nr2 = r9\ncall 1\nr7 = r0\nif r6 == 0 goto out\n")
_OUT = "out:\nr0 = 0\nexit"
_R7_NULL = "R7 invalid mem access 'map_value_or_null'"
# r0 = bpf_xdp_ct_lookup(ctx in r1, tuple at fp-40, 12, opts at fp-16, 12)
_CT_LOOKUP = """r2 = r10
r2 += -40
r3 = 12
r4 = r10
r4 += -16
r5 = 12
call KFUNC(bpf_xdp_ct_lookup)"""
# bpf_ringbuf_reserve_dynptr(rb, 16, 0, fp-16), then bpf_ringbuf_submit_dynptr(fp-16, 0)
_RBD = "r1 = MAP(rb)\nr2 = 16\nr3 = 0\nr4 = r10\nr4 += -16\ncall 198\n"
_RBD_SUB = "r1 = r10\nr1 += -16\nr2 = 0\ncall 199\n"
_RBD_EXIT = _RBD_SUB + "r0 = 2\nexit"
# r0 = bpf_dynptr_data(fp-16, 0, 8)
_RBD_DATA = "r1 = r10\nr1 += -16\nr2 = 0\nr3 = 8\ncall 203\n"
_BAD_UNREF = ("invalid kptr access, R{r} type={t} expected=ptr_prog_test_ref_kfunc or "
              "untrusted_ptr_prog_test_ref_kfunc")
_UNTRUSTED_REF = "untrusted_ptr_prog_test_ref_kfunc"
# r0 = bpf_rdonly_cast(0, 0): read-only untrusted memory
_UMEM = "r1 = 0\nr2 = 0\ncall KFUNC(bpf_rdonly_cast)\n"
# r1 = an iterator at fp-16 / fp-8
_IT16 = "r1 = r10\nr1 += -16\n"
_IT8 = "r1 = r10\nr1 += -8\n"
# r0 = the value of key 0 of kptrs (jumps to out when NULL)
_KPTRS = ("r1 = 0\n*(u32 *)(r10 -4) = r1\nr2 = r10\nr2 += -4\nr1 = MAP(kptrs)\ncall 1\n"
          "if r0 == 0 goto out\n")
_LEAK = "BPF_EXIT instruction in main prog would lead to reference leak"
_IT = "r1 = r10\nr1 += -24\n"
_IT_NEW = _IT + "r2 = 0\nr3 = 0\ncall KFUNC(bpf_iter_task_new)\n"
_IT_END = _IT + "call KFUNC(bpf_iter_task_destroy)\nr0 = 2\nexit"
_UNACQ = "arg 1 is an unacquired reference"
# r6 = arr[0]'s value (jumps to out when NULL); bpf_dynptr_from_mem(r6, 16, 0, fp-24)
_FROM_MEM = ("r1 = 0\n*(u32 *)(r10 -4) = r1\nr2 = r10\nr2 += -4\nr1 = MAP(arr)\ncall 1\n"
             "if r0 == 0 goto out\nr6 = r0\n"
             "r1 = r6\nr2 = 16\nr3 = 0\nr4 = r10\nr4 += -24\ncall 197\n")
_PREC_SPILL = ("call 7\nr6 = r0\ncall 7\nr9 = r0\nr7 = 4\nif r6 > 10 goto +1\nr9 = 5\n{st}\n"
               "{ld}\nr2 = r10\nr2 += -16\nr2 += r8\nr0 = r9\nexit")
# r0 = the value of key 0 of arr, or NULL
_ARR0 = "r1 = 0\n*(u32 *)(r10 -4) = r1\nr2 = r10\nr2 += -4\nr1 = MAP(arr)\ncall 1\n"
# r6 = data, checked for 64 bytes (jumps to out when shorter)
_PKT64 = "r6 = *(u32 *)(r1 +0)\nr7 = *(u32 *)(r1 +4)\nr8 = r6\nr8 += 64\nif r8 > r7 goto out\n"
_NO_PKT = "helper access to the packet is not allowed"
# main makes an XDP dynptr at fp-16 and passes it to global g1(struct bpf_dynptr *),
# whose body follows
_GD = (Func("main", True, ("ctx",)), Func("g1", True, ("dynptr",)))
_GD_MAIN = """
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
call g1
r0 = 2
exit
g1:
"""
_CALLER_INVALID = "Caller passes invalid args into func#1 ('g1')"
# main calls global g1 with R1 as it is (_G1) or pointing to 8 zeroed bytes of its stack
_G1 = "call g1\nr0 = 2\nexit\ng1:\n"
_G1_STACK = "r1 = 0\n*(u64 *)(r10 -8) = r1\nr1 = r10\nr1 += -8\n" + _G1


def _gt(*args: str) -> tuple[Func, ...]:
    """main and a global g1 with ``args``."""
    return Func("main", True, ("ctx",)), Func("g1", True, args)


# r4 = data + 14, compared beyond data_end; the code after it runs where r4 > data_end
_PKT_BEYOND = _PKT + "r4 = r2\nr4 += 14\nif r4 > r3 goto beyond\nr0 = 1\nexit\nbeyond:\n"
# r0 = lookup(map, &key) with the key (0) at fp-8
_LOOKUP = "r2 = 0\n*(u32 *)(r10 -8) = r2\nr2 = r10\nr2 += -8\nr1 = MAP({m})\ncall 1\n"


# call bpf_get_prandom_u32; r6 = 64 on the taken branch, 0 on the fall-through (explored
# first); the join is the first place with enough instructions and jumps behind it for a
# kept state (2 jumps and 8 instructions).
_PREC = """r9 = r1
call 7
r6 = 64
if r0 > 10 goto +9
r6 = 0
r1 = 1
r1 = 2
r1 = 3
r1 = 4
r1 = 5
r1 = 6
r1 = 7
r1 = 8
r1 = 7
{use}
r0 = 2
exit"""
_LOOP = "r1 = 4\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\ncall 181\nr0 = 2\nexit\ncb:\n{cb}\nexit"
# a main program and its callback (static functions, with BTF func_info)
_CB = (Func("main"), Func("cb"))
# queued[0]'s value in r6 (to label out:)
_WQ_LOOKUP = """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(queued)
call 1
if r0 == 0 goto out
r6 = r0"""


# tasked[0]'s value in r6, the task of pid 1 (referenced) in r7 (to label out:, release:)
_TW_PREP = _WQ_LOOKUP.replace("queued", "tasked") + """
r1 = 1
call KFUNC(bpf_task_from_pid)
if r0 == 0 goto out
r7 = r0"""
# the call (KFUNC) with r1-r3 set before, then the task released
_TW_CALL = """r4 = subprog[cb]
r5 = 0
call KFUNC({k})
release:
r1 = r7
call KFUNC(bpf_task_release)
out:
r0 = 2
exit
cb:
r0 = *(u64 *)(r3 +0)
r0 = *(u32 *)(r2 +0)
r0 = 0
exit"""
_TW_SIG = "bpf_task_work_schedule_signal_impl"
_TW_OTHER = "bpf_task_work pointer in R2 map_uid=0 doesn't match map pointer in R3 map_uid=0"
_TW_RES = "bpf_task_work_schedule_resume_impl"


# A load through a scalar (refused): the path a decided compare skips.
_DEREF_SCALAR = "r1 = 0\nr0 = *(u64 *)(r1 +0)\nr0 = 2\nexit"
_IN_RCU = "BPF_EXIT instruction in main prog cannot be used inside bpf_rcu_read_lock-ed region"
_IN_PREEMPT = ("BPF_EXIT instruction in main prog cannot be used inside "
               "bpf_preempt_disable-ed region")


# r1 linked to r0 with an offset ({op}); r0 bounded to [1, 10] then r1 compared with {lim}
_LINKED_OFF = """call 7
{pre}
r1 = r0
{op}
if r0 > 10 goto +5
if r0 < 1 goto +4
if r1 > {lim} goto +1
goto +2
r1 = 0
r0 = *(u64 *)(r1 +0)
r0 = 2
exit"""
_SCALAR_MEM = "R1 invalid mem access 'scalar'"


# r0 = a NULL-checked lookup of key 0 in map {m} (jumps to out when NULL)
_LOOKUP_OUT = ("r1 = 0\n*(u32 *)(r10 -4) = r1\nr1 = MAP({m})\nr2 = r10\nr2 += -4\ncall 1\n"
           "if r0 == 0 goto out\n")
# r1 = 1 (stdout), r2 the format in fmts, an 8-byte argument at fp-8
_FMT = _LOOKUP_OUT.format(m="fmts") + "r2 = r0\nr1 = 7\n*(u64 *)(r10 -8) = r1\nr1 = 1\n"
_VPRINTK = "r5 = 0\ncall KFUNC(bpf_stream_vprintk_impl)\nout:\nr0 = 2\nexit"
# after _LOOKUP_OUT: bpf_snprintf({out}, fmts' format "s %d\\n", fp-16, {n})
_SNPRINTF = ("r7 = r0\nr1 = 7\n*(u64 *)(r10 -16) = r1\n{out}\nr3 = r7\nr4 = r10\nr4 += -16\n"
             "r5 = {n}\ncall 165\nout:\nr0 = 2\nexit")


# r6 from bpf_get_prandom_u32 narrowed by ``init``, compared by ``cmp``; both ways add r6 to
# the frame pointer and read there
_SELF = ("call 7\nr6 = r0\n{init}\nif {cmp} goto p\nr1 = r10\nr1 += -64\nr1 += r6\n"
         "r0 = *(u8 *)(r1 +0)\nr0 = 2\nexit\np:\nr1 = r10\nr1 += -64\nr1 += r6\n"
         "r0 = *(u8 *)(r1 +0)\nr0 = 2\nexit")
_TEST_REG_INVARIANTS = 1 << 7  # BPF_F_TEST_REG_INVARIANTS
# r0 = bpf_dynptr_slice(an XDP dynptr at fp-16, 0, NULL, 14): read-only memory (jumps to
# out when NULL)
_XDP_SLICE = ("r2 = 0\nr3 = r10\nr3 += -16\ncall KFUNC(bpf_dynptr_from_xdp)\nr1 = r10\n"
              "r1 += -16\nr2 = 0\nr3 = 0\nr4 = 14\ncall KFUNC(bpf_dynptr_slice)\n"
              "if r0 == 0 goto out\n")
_MEM_ARG = "fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, trusted_ptr_"


# a ringbuf record held across a call of global function sub, then the function's text
_GT_RB = ("r1 = MAP(rb)\nr2 = 16\nr3 = 0\ncall 131\nif r0 == 0 goto out\nr9 = r0\nr1 = 5\n"
          "call sub\nr1 = r9\nr2 = 0\ncall 133\nout:\nr0 = 2\nexit\nsub:\n{sub}")
_GT_THROW = "r1 = 5\ncall KFUNC(bpf_throw)\nr0 = 0\nexit"
_GT_FUNCS = (Func("main"), Func("sub", True))
_GT_LEAK = "bpf_throw would lead to reference leak"
# something acquired, then a call of static function sub (its text follows), then released
_TC_HELD = ("r6 = r1\n{acq}r1 = r6\ncall sub\n{rel}out:\nr0 = 2\nexit\nsub:\nr6 = r1\n{sub}")
_TC_SUB = "r1 = r6\nr2 = MAP(progs)\nr3 = 0\ncall 12\nr0 = 0\nexit"
_TC_FUNCS = (Func("main", True, ("ctx",)), Func("sub", False, ("ctx",)))
# a timer of map timed's value 0 given callback cb, whose text follows
_TIMER_CB = ("r1 = 0\n*(u32 *)(r10 -4) = r1\nr2 = r10\nr2 += -4\nr1 = MAP(timed)\ncall 1\n"
             "if r0 == 0 goto out\nr6 = r0\nr1 = r6\nr1 += 8\nr2 = MAP(timed)\nr3 = 1\n"
             "call 169\nr1 = r6\nr1 += 8\nr2 = subprog[cb]\ncall 170\nout:\nr0 = 2\nexit\n"
             "cb:\n")
# a ringbuf dynptr of 16 bytes at fp-32
_RB_DYNPTR = "r1 = MAP(rb)\nr2 = 16\nr3 = 0\nr4 = r10\nr4 += -32\ncall 198\n"
# main and a global function taking a pointer to an empty struct
_G0 = (Func("main", True, ("ctx",)), Func("fn", True, ("mem:0",)))
# r0: a lookup of key 0 in arr, maybe NULL
_LOOKUP_ARR = "*(u32 *)(r10 -4) = 0\nr2 = r10\nr2 += -4\nr1 = MAP(arr)\ncall 1\n"


def _c(name: str, asm: str, linux: str | None, **kw: object) -> VerifierCase:
    return VerifierCase(name, asm.strip(), linux, **kw)  # type: ignore[arg-type]


# Two paths writing fp-8 their way (``first`` walked first, with enough jumps and
# instructions for a state to be kept at j:), then ``tail`` after they join.
def _join(first: str, second: str, tail: str) -> str:
    return ("r9 = r1\ncall 7\nr6 = r0\nr7 = 0\nr1 = 0\n*(u64 *)(r10 -16) = r1\n"
            "if r6 > 10 goto a\n" + first + "if r6 > 3 goto +1\nr7 = 1\nif r6 > 5 goto +1\n"
            "r7 = 2\nr7 = 3\nr8 = 0\nr8 = 1\nr8 = 2\nr8 = 3\nr8 = 4\ngoto j\na:\n" + second +
            "r7 = 3\nj:\n" + tail + "r3 += 1\nr3 += 1\nr3 += 1\nr0 = 2\nexit")


# a byte of fp-16 (a spilled 0) at a variable offset from what r2 holds
_VAR_FP16 = "r2 &= 7\nr4 = r10\nr4 += -16\nr4 += r2\nr3 = *(u8 *)(r4 +0)\n"


# 8,192 two-way branches on one path: the jump stack is full (BPF_COMPLEXITY_LIMIT_JMP_SEQ)
_JMP_SEQ = "call 7\nr8 = r0\n" + "".join(f"if r8 > {100000 - i} goto +1\nr7 = 1\n"
                                          for i in range(8192))
_JMP_SEQ_LINE = "The sequence of 8193 jumps is too complex."


# -- IRQ state (bpf_local_irq_save/_restore): an 8-byte stack slot of its own (STACK_IRQ_FLAG)
# holding an IRQ reference; restored last saved first; none saved at the exit or a tail call
def _irq(call: str, off: int = 8) -> str:
    return f"r1 = r10\nr1 += -{off}\ncall KFUNC(bpf_local_irq_{call})\n"


_SAVE, _RESTORE, _SAVE16, _RESTORE16 = _irq("save"), _irq("restore"), _irq("save", 16), \
    _irq("restore", 16)
_IN_IRQ = ("BPF_EXIT instruction in main prog cannot be used inside bpf_local_irq_save-ed "
           "region")
_IRQ_UNINIT, _IRQ_INIT = ("expected uninitialized irq flag as arg#0",
                          "expected an initialized irq flag as arg#0")
_IRQ_LOOP = "r1 = 4\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\ncall 181\n"
_IRQ_ITER = "r1 = r10\nr1 += -24\nr2 = 0\nr3 = 4\ncall KFUNC(bpf_iter_num_new)\n"
# a branch on a random number: one path saves at fp-8 then fp-16, the other fp-16 then
# fp-8 (or the reverse); the join is kept first on the fall-through path and the other
# must not be pruned there (the slots' ids differ in order)
_IRQ_ORDER = ("call 7\nr6 = r0\nif r6 > 10 goto +7\n{a}{b}goto +6\n{b}{a}"
              "r1 = 1\nr1 = 2\nr1 = 3\nr1 = 4\nr1 = 5\nr1 = 6\nr1 = 7\nr1 = 8\n"
              + _RESTORE16 + _RESTORE + "r0 = 2\nexit")
_IRQ_CASES = (
    _c("irq_pair", _SAVE + _RESTORE + "r0 = 2\nexit", None),
    _c("irq_nested", _SAVE + _SAVE16 + _RESTORE16 + _RESTORE + "r0 = 2\nexit", None),
    _c("irq_leak", _SAVE + "r0 = 2\nexit", _IN_IRQ, err=errno.EINVAL),
    _c("irq_restore_uninit", _RESTORE + "r0 = 2\nexit", _IRQ_INIT, err=errno.EINVAL),
    _c("irq_restore_twice", _SAVE + _RESTORE + _RESTORE + "r0 = 2\nexit", _IRQ_INIT,
       err=errno.EINVAL),
    _c("irq_restore_other_slot", _SAVE + _RESTORE16 + "r0 = 2\nexit", _IRQ_INIT,
       err=errno.EINVAL),
    _c("irq_save_twice", _SAVE + _SAVE + _RESTORE + "r0 = 2\nexit", _IRQ_UNINIT,
       err=errno.EINVAL),
    _c("irq_null", "r1 = 0\ncall KFUNC(bpf_local_irq_save)\nr0 = 2\nexit",
       "Possibly NULL pointer passed to trusted arg0"),
    _c("irq_ctx", "call KFUNC(bpf_local_irq_save)\nr0 = 2\nexit",
       "arg#0 doesn't point to an irq flag on stack", err=errno.EINVAL),
    _c("irq_misaligned", _irq("save", 12) + "r0 = 2\nexit", _IRQ_UNINIT, err=errno.EINVAL),
    _c("irq_above_frame", "r1 = r10\nr1 += 8\ncall KFUNC(bpf_local_irq_save)\nr0 = 2\nexit",
       _IRQ_UNINIT, err=errno.EINVAL),
    _c("irq_out_of_stack", _irq("save", 520) + "r0 = 2\nexit",
       "invalid write to stack R1 off=-520 size=8"),
    _c("irq_out_of_order", _SAVE + _SAVE16 + _RESTORE + _RESTORE16 + "r0 = 2\nexit",
       "cannot restore irq state out of order, expected id=2 acquired at insn_idx=5"),
    _c("irq_read_flag", _SAVE + "r0 = *(u64 *)(r10 -8)\n" + _RESTORE + "r0 = 2\nexit",
       "invalid read from stack off -8+0 size 8"),
    _c("irq_helper_reads_flag", _SAVE + "r1 = MAP(arr)\nr2 = r10\nr2 += -8\ncall 1\n"
       + _RESTORE + "r0 = 2\nexit", "invalid read from stack R2 off -8+0 size 4"),
    # a store over the slot is allowed; the slot is then data, not a flag
    _c("irq_overwritten", _SAVE + "r0 = 0\n*(u64 *)(r10 -8) = r0\n" + _RESTORE
       + "r0 = 2\nexit", _IRQ_INIT, err=errno.EINVAL),
    _c("irq_byte_overwritten", _SAVE + "r0 = 0\n*(u8 *)(r10 -8) = r0\n" + _RESTORE
       + "r0 = 2\nexit", _IRQ_INIT, err=errno.EINVAL),
    _c("irq_pointer_over", _SAVE + "*(u64 *)(r10 -8) = r10\n" + _RESTORE + "r0 = 2\nexit",
       _IRQ_INIT, err=errno.EINVAL),
    _c("irq_helper_inside", _SAVE + "r1 = 0\n*(u32 *)(r10 -12) = r1\nr1 = MAP(arr)\n"
       "r2 = r10\nr2 += -12\ncall 1\n" + _RESTORE + "r0 = 2\nexit", None),
    _c("irq_rcu_inside", _SAVE + "call KFUNC(bpf_rcu_read_lock)\n"
       "call KFUNC(bpf_rcu_read_unlock)\n" + _RESTORE + "r0 = 2\nexit", None),
    # check_resource_leak's order: references, then IRQ state, then RCU and preemption
    _c("irq_before_rcu", "call KFUNC(bpf_rcu_read_lock)\n" + _SAVE + "r0 = 2\nexit",
       _IN_IRQ, err=errno.EINVAL),
    _c("irq_preempt_left", _SAVE + "call KFUNC(bpf_preempt_disable)\n" + _RESTORE
       + "r0 = 2\nexit", _IN_PREEMPT, err=errno.EINVAL),
    _c("irq_ref_first", _IRQ_ITER + _SAVE + "r0 = 2\nexit",
       "BPF_EXIT instruction in main prog would lead to reference leak", err=errno.EINVAL),
    # a flag saved over an iterator's slot (the iterator leaks) and the reverse
    _c("irq_save_over_iter", _IRQ_ITER + _irq("save", 24) + "r0 = 2\nexit",
       "BPF_EXIT instruction in main prog would lead to reference leak", err=errno.EINVAL),
    _c("irq_dynptr_over", "r6 = r1\n" + _SAVE16 + "r1 = r6\nr2 = 0\nr3 = r10\nr3 += -16\n"
       "call KFUNC(bpf_dynptr_from_xdp)\nr0 = 2\nexit", _IN_IRQ, err=errno.EINVAL),
    _c("irq_tail", "r6 = r1\n" + _SAVE + "r1 = r6\nr2 = MAP(progs)\nr3 = 0\ncall 12\n"
       + _RESTORE + "r0 = 2\nexit", "tail_call cannot be used inside bpf_local_irq_save-ed "
       "region", err=errno.EINVAL),
    _c("irq_global", "r6 = r1\n" + _SAVE + "r1 = r6\ncall g1\n" + _RESTORE
       + "r0 = 2\nexit\ng1:\nr0 = 0\nexit", None, funcs=_gt("ctx")),
    # static functions may save or restore for their caller; a callback's state is the
    # caller's after bpf_loop
    _c("irq_static_save", "r1 = r10\nr1 += -8\ncall sub\n" + _RESTORE
       + "r0 = 2\nexit\nsub:\ncall KFUNC(bpf_local_irq_save)\nr0 = 0\nexit", None,
       funcs=(Func("main"), Func("sub"))),
    _c("irq_static_restore", _SAVE + "r1 = r10\nr1 += -8\ncall sub\nr0 = 2\nexit\nsub:\n"
       "call KFUNC(bpf_local_irq_restore)\nr0 = 0\nexit", None,
       funcs=(Func("main"), Func("sub"))),
    _c("irq_cb_pair", _IRQ_LOOP + "r0 = 2\nexit\ncb:\n" + _SAVE + _RESTORE + "r0 = 0\nexit",
       None, funcs=_CB),
    _c("irq_cb_save", _IRQ_LOOP + "r0 = 2\nexit\ncb:\n" + _SAVE + "r0 = 0\nexit", _IN_IRQ,
       err=errno.EINVAL, funcs=_CB),
    _c("irq_loop_inside", _SAVE + _IRQ_LOOP + _RESTORE + "r0 = 2\nexit\ncb:\nr0 = 0\nexit",
       None, funcs=_CB),
    # branches: a flag saved on one path only is not restored on the other
    _c("irq_branch", "call 7\nif r0 > 10 goto +3\n" + _SAVE + _RESTORE + "r0 = 2\nexit",
       _IRQ_INIT, err=errno.EINVAL),
    _c("irq_same_branch", "call 7\nr6 = r0\nif r6 > 10 goto +3\n" + _SAVE
       + "if r6 > 10 goto +3\n" + _RESTORE + "r0 = 2\nexit", None),
    _c("irq_order_pruned", _IRQ_ORDER.format(a=_SAVE, b=_SAVE16),
       "cannot restore irq state out of order, expected id=5 acquired at insn_idx=15"),
    _c("irq_order_pruned2", _IRQ_ORDER.format(a=_SAVE16, b=_SAVE),
       "cannot restore irq state out of order, expected id=3 acquired at insn_idx=8"),
)


# -- xfrm states (net/xfrm/xfrm_state_bpf.c): a lookup acquires a reference -------------------
# r0 = bpf_xdp_get_xfrm_state(ctx in r1, opts at fp-40, 36)
_XFRM_GET = """r2 = r10
r2 += -40
r3 = 36
call KFUNC(bpf_xdp_get_xfrm_state)"""
# main: a state (NULL-checked) passed to g1, released after the call
_XFRM_TO_G1 = _XFRM_GET + """
if r0 == 0 goto +6
r7 = r0
r1 = r0
call g1
r1 = r7
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit
g1:
"""
_XFRM_CASES: tuple[VerifierCase, ...] = (
    _c("xfrm_leak", _XFRM_GET + "\nr0 = 2\nexit",
       "BPF_EXIT instruction in main prog would lead to reference leak", err=errno.EINVAL),
    _c("xfrm_release", _XFRM_GET + """
if r0 == 0 goto +2
r1 = r0
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", None),
    _c("xfrm_release_unchecked", _XFRM_GET + """
r1 = r0
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", "Possibly NULL pointer passed to trusted arg0"),
    _c("xfrm_release_twice", _XFRM_GET + """
if r0 == 0 goto +4
r6 = r0
r1 = r0
call KFUNC(bpf_xdp_xfrm_state_release)
r1 = r6
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", "arg#0 pointer type STRUCT xfrm_state must point to scalar, or struct with scalar",
       err=errno.EINVAL),
    _c("xfrm_opts_past_stack", _XFRM_GET.replace("r3 = 36", "r3 = 48") + """
r0 = 2
exit""", "arg#1 arg#2 memory, len pair leads to invalid memory access", err=errno.EINVAL),
    _c("xfrm_opts_zero_size", _XFRM_GET.replace("r3 = 36", "r3 = 0") + """
if r0 == 0 goto +2
r1 = r0
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", None),
    _c("xfrm_ctx_not_ctx", "r1 = r10\nr1 += -8\n" + _XFRM_GET + "\nr0 = 2\nexit",
       "arg#0 expected pointer to ctx, but got fp", err=errno.EINVAL),
    _c("xfrm_release_ct", _CT_LOOKUP + """
if r0 == 0 goto +2
r1 = r0
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", "kernel function bpf_xdp_xfrm_state_release args#0 expected pointer to STRUCT "
       "xfrm_state but R1 has a pointer to STRUCT nf_conn", err=errno.EINVAL),
    # btf_struct_walk: x->replay_esn->replay_window, as Linux's selftest reads it
    _c("xfrm_walk_replay_esn", _XFRM_GET + """
if r0 == 0 goto +6
r6 = r0
r2 = *(u64 *)(r6 +480)
if r2 == 0 goto +1
r3 = *(u32 *)(r2 +20)
r1 = r6
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", None),
    _c("xfrm_walk_unchecked", _XFRM_GET + """
if r0 == 0 goto +5
r6 = r0
r2 = *(u64 *)(r6 +480)
r3 = *(u32 *)(r2 +20)
r1 = r6
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", None),
    _c("xfrm_beyond_struct", _XFRM_GET + """
if r0 == 0 goto +4
r6 = r0
r2 = *(u32 *)(r6 +816)
r1 = r6
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", "access beyond struct xfrm_state at off 816 size 4"),
    _c("xfrm_ptr_member_part", _XFRM_GET + """
if r0 == 0 goto +4
r6 = r0
r2 = *(u32 *)(r6 +480)
r1 = r6
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", "cannot access ptr member replay_esn with moff 480 in struct "
       "xfrm_state with off 480 size 4"),
    _c("xfrm_member_end", _XFRM_GET + """
if r0 == 0 goto +4
r6 = r0
r2 = *(u64 *)(r6 +132)
r1 = r6
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", "access beyond the end of member spi (mend:20) in struct xfrm_id "
       "with off 16 size 8"),
    _c("xfrm_walked_release", _XFRM_GET + """
if r0 == 0 goto +7
r6 = r0
r1 = *(u64 *)(r6 +456)
if r1 == 0 goto +1
call KFUNC(bpf_xdp_xfrm_state_release)
r1 = r6
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", "R1 must be referenced or trusted", err=errno.EINVAL),
    _c("xfrm_union_member", _XFRM_GET + """
if r0 == 0 goto +4
r6 = r0
r2 = *(u32 *)(r6 +124)
r1 = r6
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit""", None),
    _c("xfrm_read_state", _XFRM_GET + """
if r0 == 0 goto +4
r6 = *(u32 *)(r0 +132)
r1 = r0
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = r6
r0 = 2
exit""", None),
)


# -- sockets and syncookies (net/core/filter.c): lookups acquire a reference ----------------
# A tuple of 12 zero bytes on the stack, BPF_F_CURRENT_NETNS, no flags.
_SK_TUPLE = """
r2 = 0
*(u64 *)(r10 -16) = r2
*(u32 *)(r10 -8) = r2
r2 = r10
r2 += -16
r3 = 12
r4 = -1
r5 = 0
"""
_SK_RELEASE = """
r1 = r0
call 86
"""
# 40 zero bytes below the frame: an iphdr at -40, a tcphdr at -20
_TCP_HDRS = """
r1 = 0
*(u64 *)(r10 -8) = r1
*(u64 *)(r10 -16) = r1
*(u64 *)(r10 -24) = r1
*(u64 *)(r10 -32) = r1
*(u64 *)(r10 -40) = r1
"""
_SOCK_ARG = "sock_common, sock, tcp_sock, xdp_sock, ptr_, trusted_ptr_"
_SOCK_CASES: tuple[VerifierCase, ...] = (
    _c("sk_lookup_tcp_ok", _SK_TUPLE + """
call 84
if r0 == 0 goto +4
r6 = *(u32 *)(r0 +4)

r1 = r0
call 86
r0 = r6
exit""", None),
    _c("sk_lookup_udp_fields", _SK_TUPLE + """
call 85
if r0 == 0 goto +13
r6 = *(u32 *)(r0 +44)
r7 = *(u16 *)(r0 +48)
r7 = *(u8 *)(r0 +49)
r7 = *(u32 *)(r0 +48)
r7 = *(u8 *)(r0 +25)
r7 = *(u16 *)(r0 +70)
r7 = *(u32 *)(r0 +76)
r7 = *(u32 *)(r0 +16)
r7 = *(u32 *)(r0 +0)

r1 = r0
call 86
r0 = r6
exit
r0 = 1
exit""", None),
    _c("sk_lookup_leak", _SK_TUPLE + """
call 84
r0 = 2
exit""", 'BPF_EXIT instruction in main prog would lead to reference leak', err=errno.EINVAL),
    _c("sk_lookup_leak_path", _SK_TUPLE + """
call 85
if r0 == 0 goto +4
r6 = *(u32 *)(r0 +4)
if r6 == 2 goto +2
r1 = r0
call 86
r0 = 2
exit""", 'BPF_EXIT instruction in main prog would lead to reference leak', err=errno.EINVAL),
    _c("sk_lookup_unchecked", _SK_TUPLE + """
call 84
r6 = *(u32 *)(r0 +4)

r1 = r0
call 86
r0 = 2
exit""", "R0 invalid mem access 'sock_or_null'"),
    _c("sk_release_unchecked", _SK_TUPLE + """
call 84

r1 = r0
call 86
r0 = 2
exit""", f"R1 type=sock_or_null expected={_SOCK_ARG}"),
    _c("sk_read_padding", _SK_TUPLE + """
call 84
if r0 == 0 goto +3
r6 = *(u16 *)(r0 +50)

r1 = r0
call 86
r0 = 2
exit""", 'R0 invalid sock access off=50 size=2'),
    _c("sk_read_u64", _SK_TUPLE + """
call 84
if r0 == 0 goto +3
r6 = *(u64 *)(r0 +0)

r1 = r0
call 86
r0 = 2
exit""", 'R0 invalid sock access off=0 size=8'),
    _c("sk_read_narrow_mark", _SK_TUPLE + """
call 84
if r0 == 0 goto +3
r6 = *(u16 *)(r0 +16)

r1 = r0
call 86
r0 = 2
exit""", 'R0 invalid sock access off=16 size=2'),
    _c("sk_read_past_end", _SK_TUPLE + """
call 84
if r0 == 0 goto +3
r6 = *(u32 *)(r0 +80)

r1 = r0
call 86
r0 = 2
exit""", 'R0 invalid sock access off=80 size=4'),
    _c("sk_write", _SK_TUPLE + """
call 84
if r0 == 0 goto +3
*(u32 *)(r0 +16) = r0

r1 = r0
call 86
r0 = 2
exit""", 'R0 cannot write into sock'),
    _c("skc_lookup_ok", _SK_TUPLE + """
call 99
if r0 == 0 goto +4
r6 = *(u32 *)(r0 +44)

r1 = r0
call 86
r0 = r6
exit""", None),
    _c("skc_read_type", _SK_TUPLE + """
call 99
if r0 == 0 goto +3
r6 = *(u32 *)(r0 +8)

r1 = r0
call 86
r0 = 2
exit""", 'R0 invalid sock_common access off=8 size=4'),
    _c("sk_ptr_arith", _SK_TUPLE + """
call 84
if r0 == 0 goto +3
r0 += 4

r1 = r0
call 86
r0 = 2
exit""", 'R0 pointer arithmetic on sock prohibited'),
    _c("sk_double_release", _SK_TUPLE + """
call 84
if r0 == 0 goto +5
r6 = r0

r1 = r0
call 86
r1 = r6
call 86
r0 = 2
exit""", f"R1 type=scalar expected={_SOCK_ARG}"),
    _c("sk_lookup_zero_len", _SK_TUPLE + """
r3 = 0
call 84
if r0 == 0 goto +2

r1 = r0
call 86
r0 = 2
exit""", None),
    _c("sk_lookup_tuple_oob", _SK_TUPLE + """
r3 = 20
call 84
if r0 == 0 goto +2

r1 = r0
call 86
r0 = 2
exit""", 'invalid read from stack R2 off=-16 size=20', err=errno.EINVAL),
    _c("sk_release_ctx", """
call 86
r0 = 2
exit""", f"R1 type=ctx expected={_SOCK_ARG}"),
    _c("sk_release_null", """
r1 = 0
call 86
r0 = 2
exit""", f"R1 type=scalar expected={_SOCK_ARG}"),
    _c("sk_lookup_nongpl", _SK_TUPLE + """
call 84
if r0 == 0 goto +2

r1 = r0
call 86
r0 = 2
exit""", None, license="Dual BSD"),
    _c("sk_spill_ok", _SK_TUPLE + """
call 84
if r0 == 0 goto +5
*(u64 *)(r10 -24) = r0
r1 = *(u64 *)(r10 -24)
call 86
r0 = 2
exit
r0 = 1
exit""", None),
    _c("syncookie_check_ok", _SK_TUPLE + """
call 84
if r0 == 0 goto +18
r6 = r0
r1 = 0
*(u64 *)(r10 -24) = r1
*(u64 *)(r10 -32) = r1
*(u64 *)(r10 -40) = r1
*(u64 *)(r10 -48) = r1
*(u64 *)(r10 -56) = r1
r1 = r6
r2 = r10
r2 += -56
r3 = 20
r4 = r10
r4 += -36
r5 = 20
call 100
r1 = r6
call 86
r0 = 2
exit""", None),
    _c("syncookie_gen_ctx", """
r6 = r1

r1 = 0
*(u64 *)(r10 -8) = r1
*(u64 *)(r10 -16) = r1
*(u64 *)(r10 -24) = r1
*(u64 *)(r10 -32) = r1
*(u64 *)(r10 -40) = r1
r1 = r6
r2 = r10
r2 += -40
r3 = 20
r4 = r10
r4 += -20
r5 = 20
call 110
r0 = 2
exit""", f"R1 type=ctx expected={_SOCK_ARG}"),
    _c("raw_gen_ok", _TCP_HDRS + """
r1 = r10
r1 += -40
r2 = r10
r2 += -20
r3 = 20
call 204
r0 = 2
exit""", None),
    _c("raw_gen_nongpl", _TCP_HDRS + """
r1 = r10
r1 += -40
r2 = r10
r2 += -20
r3 = 20
call 204
r0 = 2
exit""", "cannot call GPL-restricted function from non-GPL compatible program",
       license="Dual BSD", err=errno.EINVAL),
    _c("raw_gen6_short", _TCP_HDRS + """
r1 = r10
r1 += -24
r2 = r10
r2 += -20
r3 = 0
call 205
r0 = 2
exit""", 'invalid read from stack R1 off=-24 size=40', err=errno.EINVAL),
    _c("raw_check_ok", _TCP_HDRS + """
r1 = r10
r1 += -40
r2 = r10
r2 += -20
call 206
r0 = 2
exit""", None),
    _c("raw_check6_ok", """
r1 = 0
*(u64 *)(r10 -8) = r1
*(u64 *)(r10 -16) = r1
*(u64 *)(r10 -24) = r1
*(u64 *)(r10 -32) = r1
*(u64 *)(r10 -40) = r1
*(u64 *)(r10 -48) = r1
*(u64 *)(r10 -56) = r1
*(u64 *)(r10 -64) = r1
r1 = r10
r1 += -64
r2 = r10
r2 += -24
call 207
r0 = 2
exit""", None),
    _c("raw_check_pkt", """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 54
if r4 > r3 goto +6
r1 = r2
r1 += 14
r2 += 34
call 206
r0 = 2
exit
r0 = 1
exit""", None),
    _c("raw_check_pkt_short", """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 50
if r4 > r3 goto +6
r1 = r2
r1 += 14
r2 += 34
call 206
r0 = 2
exit
r0 = 1
exit""", 'R2 offset is outside of the packet'),
)


# -- the kernel's structs: bpf_cast_to_kern_ctx (a trusted struct xdp_buff *) and
# bpf_rdonly_cast (untrusted), loads walked through the kernel's BTF -------------------------
_KCTX = "call KFUNC(bpf_cast_to_kern_ctx)\n"
_KERN_CTX_CASES: tuple[VerifierCase, ...] = (
    _c("kctx_fields", _KCTX + """
r1 = *(u64 *)(r0 +32)
r1 = *(u64 *)(r1 +0)
r1 = *(u32 *)(r1 +224)
r2 = *(u32 *)(r0 +48)
r3 = *(u64 *)(r0 +0)
r3 = *(u8 *)(r3 +30000)
r0 = 2
exit""", None),
    _c("kctx_write", _KCTX + """
r1 = 0
*(u32 *)(r0 +48) = r1
r0 = 2
exit""", "only read is supported"),
    _c("kctx_write_walked", _KCTX + """
r0 = *(u64 *)(r0 +32)
r1 = 0
*(u32 *)(r0 +8) = r1
r0 = 2
exit""", "only read is supported"),
    _c("kctx_beyond", _KCTX + """
r0 = *(u32 *)(r0 +56)
r0 = 2
exit""", "access beyond struct xdp_buff at off 56 size 4"),
    _c("kctx_ptr_size", _KCTX + """
r0 = *(u32 *)(r0 +32)
r0 = 2
exit""", "cannot access ptr member rxq with moff 32 in struct xdp_buff with off 32 size 4"),
    _c("kctx_ptr_inside", _KCTX + """
r0 = *(u32 *)(r0 +36)
r0 = 2
exit""", "cannot access ptr member rxq with moff 32 in struct xdp_buff with off 36 size 4"),
    _c("kctx_member_end", _KCTX + """
r0 += 4
r0 = *(u64 *)(r0 +48)
r0 = 2
exit""", "access beyond struct xdp_buff at off 52 size 8"),
    _c("kctx_member_end_walked", _KCTX + """
r0 = *(u64 *)(r0 +32)
r0 = *(u64 *)(r0 +8)
r0 = 2
exit""", "access beyond the end of member queue_index (mend:12) in struct xdp_rxq_info with "
       "off 8 size 8"),
    _c("kctx_hole", _KCTX + """
r0 = *(u64 *)(r0 +32)
r0 = *(u32 *)(r0 +32)
r0 = 2
exit""", "struct xdp_rxq_info doesn't have field at offset 32", err=errno.EINVAL),
    _c("kctx_negative", _KCTX + """
r0 = *(u64 *)(r0 -8)
r0 = 2
exit""", "R0 is ptr_xdp_buff invalid negative access: off=-8"),
    _c("kctx_var_off", """
r6 = r1
call 7
r7 = r0
r7 &= 8
r1 = r6
""" + _KCTX + """
r0 += r7
r0 = *(u64 *)(r0 +0)
r0 = 2
exit""", "R0 is ptr_xdp_buff invalid variable offset: off=0, var_off=(0x0; 0x8)"),
    _c("kctx_not_ctx", """
r1 = r10
""" + _KCTX + """
r0 = 2
exit""", "arg#0 expected pointer to ctx, but got fp", err=errno.EINVAL),
    _c("kctx_cmp_null", _KCTX + """
if r0 == 0 goto +1
r0 = *(u32 *)(r0 +48)
r0 = 2
exit""", None),
    _c("rdonly_cast_void", """
r1 = *(u32 *)(r1 +0)
r2 = 0
call KFUNC(bpf_rdonly_cast)
r0 = *(u8 *)(r0 +5000)
r0 = 2
exit""", None),
    _c("rdonly_cast_void_write", """
r2 = 0
call KFUNC(bpf_rdonly_cast)
r1 = 0
*(u8 *)(r0 +0) = r1
r0 = 2
exit""", "R0 cannot write into rdonly_untrusted_mem"),
    _c("rdonly_cast_scalar", """
r1 = 1234
r2 = 0
call KFUNC(bpf_rdonly_cast)
r0 = *(u64 *)(r0 -8)
r0 = 2
exit""", None),
    _c("rdonly_cast_unknown_id", """
r2 = 0x7fffffff
call KFUNC(bpf_rdonly_cast)
r0 = 2
exit""", "Unknown type ID 2147483647 passed to kfunc bpf_rdonly_cast", err=errno.EINVAL),
    _c("rdonly_cast_var_id", """
call 7
r2 = r0
r1 = 0
call KFUNC(bpf_rdonly_cast)
r0 = 2
exit""", "R2 must be a known constant", err=errno.EINVAL),
    _c("rdonly_cast_ptr_id", """
r2 = r1
call KFUNC(bpf_rdonly_cast)
r0 = 2
exit""", "R2 is not a scalar", err=errno.EINVAL),
    _c("rdonly_mem_null", """
r2 = 0
call KFUNC(bpf_rdonly_cast)
if r0 != 0 goto +2
r0 = 2
exit
r0 = 1
exit""", None),
)


# -- kfuncs an XDP program may name but Linux refuses when the walk reaches the call:
# KF_SLEEPABLE ones (XDP is never sleepable) and __bpf_trap (clang's unreachable code);
# the trap is refused first, the sleepable call before its arguments are looked at
_SLEEP = "program must be sleepable to call sleepable kfunc "
_TRAP = "unexpected __bpf_trap() due to uninitialized variable?"
_SL_HELD = """r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r1 = r0
r1 += 4
call 93
"""
_SLEEPABLE_CASES = (
    _c("sleep_arena_alloc", "r1 = 0\ncall KFUNC(bpf_arena_alloc_pages)\nr0 = 2\nexit",
       "calling kernel function bpf_arena_alloc_pages is not allowed"),
    _c("arena_free_xdp", "r1 = 0\ncall KFUNC(bpf_arena_free_pages)\nr0 = 2\nexit",
       "calling kernel function bpf_arena_free_pages is not allowed"),
    _c("arena_reserve_xdp", "r1 = 0\ncall KFUNC(bpf_arena_reserve_pages)\nr0 = 2\nexit",
       "calling kernel function bpf_arena_reserve_pages is not allowed"),
    _c("sleep_copy_str", "call KFUNC(bpf_copy_from_user_str)\nr0 = 2\nexit",
       _SLEEP + "bpf_copy_from_user_str"),
    _c("sleep_user_key", "r1 = 1\nr2 = 0\ncall KFUNC(bpf_lookup_user_key)\nr0 = 2\nexit",
       _SLEEP + "bpf_lookup_user_key"),
    _c("sleep_dmabuf_iter", "r1 = r10\nr1 += -8\ncall KFUNC(bpf_iter_dmabuf_new)\n"
       "r0 = 2\nexit", _SLEEP + "bpf_iter_dmabuf_new"),
    _c("sleep_in_rcu", "call KFUNC(bpf_rcu_read_lock)\ncall KFUNC(bpf_iter_kmem_cache_next)\n"
       "call KFUNC(bpf_rcu_read_unlock)\nr0 = 2\nexit", _SLEEP + "bpf_iter_kmem_cache_next"),
    _c("sleep_dead", "r0 = 2\nif r0 == 2 goto +1\ncall KFUNC(bpf_copy_from_user_dynptr)\n"
       "exit", None, processed=3),
    _c("sleep_locked", _SL_HELD + "call KFUNC(bpf_arena_free_pages)\nout:\nr0 = 2\nexit",
       "function calls are not allowed while holding a lock", err=errno.EINVAL),
    _c("trap", "r0 = 0\ncall KFUNC(__bpf_trap)\nexit", _TRAP, err=errno.EFAULT),
    _c("trap_dead", "r0 = 0\nif r0 == 0 goto +1\ncall KFUNC(__bpf_trap)\nr0 = 2\nexit",
       None, processed=4),
    _c("trap_in_irq", "r1 = r10\nr1 += -8\ncall KFUNC(bpf_local_irq_save)\n"
       "call KFUNC(__bpf_trap)\nr0 = 2\nexit", _TRAP, err=errno.EFAULT),
)


# -- BPF exceptions: bpf_throw(cookie) ends every frame; nothing may be held then, no
# callback may throw (nor a function a callback calls), the cookie is a scalar
_THROW = "r1 = {c}\ncall KFUNC(bpf_throw)\nr0 = 0\nexit"
_THROW_SUB = "call sub\nr0 = 1\nexit\nsub:\nr1 = 5\ncall KFUNC(bpf_throw)\nr0 = 0\nexit"
_THROW_CASES = (
    _c("throw", _THROW.format(c=2), None, processed=2),
    _c("throw_wide", _THROW.format(c="0x100000003 ll"), None, processed=2),
    _c("throw_no_cookie", "call KFUNC(bpf_throw)\nr0 = 0\nexit", "R1 is not a scalar",
       err=errno.EINVAL),
    _c("throw_pointer", _THROW.format(c="r10"), "R1 is not a scalar", err=errno.EINVAL),
    _c("throw_static", _THROW_SUB, None, processed=3),
    _c("throw_global", _THROW_SUB, None, processed=5,
       funcs=(Func("main"), Func("sub", True))),
    _c("throw_dead", "r0 = 2\nif r0 == 2 goto +2\nr1 = 5\ncall KFUNC(bpf_throw)\nexit",
       None, processed=3),
    _c("throw_in_rcu", "call KFUNC(bpf_rcu_read_lock)\n" + _THROW_SUB.replace(
        "r0 = 1\nexit\nsub", "call KFUNC(bpf_rcu_read_unlock)\nr0 = 1\nexit\nsub"),
       "bpf_throw cannot be used inside bpf_rcu_read_lock-ed region", err=errno.EINVAL),
    _c("throw_in_irq", "r1 = r10\nr1 += -8\ncall KFUNC(bpf_local_irq_save)\n" +
       _THROW.format(c=2), "bpf_throw cannot be used inside bpf_local_irq_save-ed region",
       err=errno.EINVAL),
    _c("throw_no_preempt", "call KFUNC(bpf_preempt_disable)\n" + _THROW.format(c=2),
       "bpf_throw cannot be used inside bpf_preempt_disable-ed region", err=errno.EINVAL),
    _c("throw_leak", "r1 = MAP(rb)\nr2 = 16\nr3 = 0\ncall 131\nif r0 == 0 goto +5\n"
       "r6 = r0\ncall sub\nr1 = r6\nr2 = 0\ncall 133\nr0 = 1\nexit\nsub:\nr1 = 5\n"
       "call KFUNC(bpf_throw)\nr0 = 0\nexit",
       "bpf_throw would lead to reference leak", err=errno.EINVAL),
    _c("throw_in_cb", _LOOP.format(cb="r1 = 9\ncall KFUNC(bpf_throw)\nr0 = 0"),
       "bpf_throw kfunc (insn 9) cannot be called from callback subprog 1", funcs=_CB,
       err=errno.EINVAL),
    _c("throw_under_cb", _LOOP.format(cb="call sub\nr0 = 0\nexit\nsub:\nr1 = 9\n"
                                         "call KFUNC(bpf_throw)\nr0 = 0"),
       "bpf_throw kfunc (insn 12) cannot be called from callback subprog 2",
       funcs=(Func("main"), Func("cb"), Func("sub")), err=errno.EINVAL),
)


_STACK_DYN = "r1 = r10\nr1 += -16\n"
# -- bpf_crypto_encrypt/_decrypt (KF_RCU): the context is a struct bpf_crypto_ctx pointer,
# which only a map value's __kptr field gives an XDP program (tests/verifier_objects/crypto.c)
_CRYPTO_CASES = (
    _c("crypto_stack_ctx", "r1 = 0\n*(u64 *)(r10 -8) = r1\nr1 = r10\nr1 += -8\nr2 = 0\n"
       "r3 = 0\nr4 = 0\ncall KFUNC(bpf_crypto_encrypt)\nr0 = 2\nexit",
       "arg#0 pointer type STRUCT bpf_crypto_ctx must point to scalar, or struct with scalar",
       err=errno.EINVAL),
    _c("crypto_value_ctx", _LOOKUP.format(m="hash") + "if r0 == 0 goto +5\nr1 = r0\nr2 = 0\n"
       "r3 = 0\nr4 = 0\ncall KFUNC(bpf_crypto_decrypt)\nr0 = 2\nexit",
       "arg#0 pointer type STRUCT bpf_crypto_ctx must point to scalar, or struct with scalar",
       err=errno.EINVAL),
    _c("crypto_kctx_ctx", "call KFUNC(bpf_cast_to_kern_ctx)\nr1 = r0\nr2 = 0\nr3 = 0\nr4 = 0\n"
       "call KFUNC(bpf_crypto_decrypt)\nr0 = 2\nexit",
       "kernel function bpf_crypto_decrypt args#0 expected pointer to STRUCT bpf_crypto_ctx "
       "but R1 has a pointer to STRUCT xdp_buff", err=errno.EINVAL),
    _c("crypto_map_ctx", "r1 = MAP(hash)\nr2 = 0\nr3 = 0\nr4 = 0\n"
       "call KFUNC(bpf_crypto_encrypt)\nr0 = 2\nexit",
       "kernel function bpf_crypto_encrypt args#0 expected pointer to STRUCT bpf_crypto_ctx "
       "but R1 has a pointer to STRUCT bpf_map", err=errno.EINVAL),
)

# -- SEC("syscall") programs (BPF_PROG_TYPE_SYSCALL, sleepable): any aligned context access
# at a fixed offset (syscall_prog_is_valid_access), base helpers, sleepable map types
_SLEEPABLE = 1 << 4


def _sys(name: str, asm: str, linux: str | None, **kw: object) -> VerifierCase:
    kw.setdefault("flags", _SLEEPABLE)
    return _c(name, asm, linux, syscall=True, **kw)


_SYSCALL_CASES = (
    _sys("sys_ld8", "r0 = *(u64 *)(r1 +0)\nexit", None),
    _sys("sys_ld1", "r0 = *(u8 *)(r1 +3)\nexit", None),
    _sys("sys_ldsx", "r0 = *(s32 *)(r1 +4)\nexit", None),
    _sys("sys_far", "r0 = *(u64 *)(r1 +32760)\nexit", None),
    _sys("sys_misaligned", "r0 = *(u16 *)(r1 +3)\nexit",
         "invalid bpf_context access off=3 size=2"),
    _sys("sys_negative", "r0 = *(u32 *)(r1 -4)\nexit",
         "invalid bpf_context access off=-4 size=4"),
    _sys("sys_store", "r2 = 5\n*(u32 *)(r1 +4) = r2\n*(u64 *)(r1 +8) = 7\nr0 = 0\nexit", None),
    _sys("sys_store_ptr", "*(u64 *)(r1 +8) = r10\nr0 = r1\nexit", None),
    _sys("sys_modified", "r1 += 4\nr0 = *(u32 *)(r1 +0)\nexit",
         "dereference of modified ctx ptr R1 off=4 disallowed"),
    _sys("sys_var_off", "r2 = *(u32 *)(r1 +0)\nr2 &= 4\nr1 += r2\nr0 = *(u32 *)(r1 +0)\nexit",
         "variable ctx access var_off=(0x0; 0x4) disallowed"),
    _sys("sys_atomic", "r2 = 1\nlock *(u64 *)(r1 +0) += r2\nr0 = 0\nexit",
         "BPF_ATOMIC stores into R1 ctx is not allowed"),
    _sys("sys_not_sleepable", "r0 = 0\nexit", "Syscall programs can only be sleepable",
         flags=0, err=errno.EINVAL),
    _sys("sys_xdp_helper", "r1 = 0\nr2 = 0\ncall 44\nr0 = 0\nexit",
         "program of this type cannot use helper bpf_xdp_adjust_head#44", err=errno.EINVAL),
    _sys("sys_lookup", "r6 = r1\n" + _LOOKUP.format(m="hash") + "if r0 == 0 goto +2\n"
         "r1 = *(u64 *)(r0 +0)\n*(u64 *)(r6 +0) = r1\nr0 = 1\nexit", None),
    _sys("sys_ctx_key", "r2 = r1\nr1 = MAP(hash)\ncall 1\nr0 = 0\nexit",
         "R2 type=ctx expected=fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, "
         "trusted_ptr_"),
    _sys("sys_devmap", "r1 = MAP(dev)\nr0 = 0\nexit",
         "Sleepable programs can only use array, hash, ringbuf and local storage maps",
         err=errno.EINVAL),
)

_MISC_CASES = (
    # -- bpf_xdp_ct_lookup's second memory, len pair (opts, opts__sz) is checked too
    _c("ct_bad_opts", "r6 = 0\n*(u64 *)(r10 -40) = r6\n*(u64 *)(r10 -32) = r6\n"
       "*(u64 *)(r10 -24) = r6\nr2 = r10\nr2 += -40\nr3 = 12\nr4 = 5\nr5 = 12\n"
       "call KFUNC(bpf_xdp_ct_lookup)\nr0 = 2\nexit",
       "arg#3 arg#4 memory, len pair leads to invalid memory access"),
    # -- bpf_map_sum_elem_count: a map pointer is a trusted struct bpf_map (reg2btf_ids)
    _c("sum_elem_map", "r1 = MAP(hash)\ncall KFUNC(bpf_map_sum_elem_count)\nr0 = 2\nexit", None),
    _c("sum_elem_stack", "r1 = 0\n*(u64 *)(r10 -8) = r1\nr1 = r10\nr1 += -8\n"
       "call KFUNC(bpf_map_sum_elem_count)\nr0 = 2\nexit",
       "arg#0 pointer type STRUCT bpf_map must point to scalar, or struct with scalar",
       err=errno.EINVAL),
    _c("sum_elem_kctx", "call KFUNC(bpf_cast_to_kern_ctx)\nr1 = r0\n"
       "call KFUNC(bpf_map_sum_elem_count)\nr0 = 2\nexit",
       "kernel function bpf_map_sum_elem_count args#0 expected pointer to STRUCT bpf_map but "
       "R1 has a pointer to STRUCT xdp_buff", err=errno.EINVAL),
    _c("sum_elem_value", _LOOKUP.format(m="hash") + "if r0 == 0 goto +2\nr1 = r0\n"
       "call KFUNC(bpf_map_sum_elem_count)\nr0 = 2\nexit",
       "arg#0 pointer type STRUCT bpf_map must point to scalar, or struct with scalar",
       err=errno.EINVAL),
    # -- bpf_modify_return_test_tp(int): a scalar
    _c("modret_tp", "r1 = 7\ncall KFUNC(bpf_modify_return_test_tp)\nexit", None,
       processed=3),
    _c("modret_tp_ptr", "r1 = r10\ncall KFUNC(bpf_modify_return_test_tp)\nexit",
       "R1 is not a scalar", err=errno.EINVAL),
    # -- bpf_skb_ct_lookup/_alloc: their struct __sk_buff is no XDP register; a global
    # function's __arg_trusted one is, which only NULL reaches
    _c("skb_ct_stack", "r1 = r10\nr1 += -8\n*(u64 *)(r10 -8) = r1\nr2 = 0\nr3 = 0\nr4 = 0\n"
       "r5 = 0\ncall KFUNC(bpf_skb_ct_lookup)\nr0 = 2\nexit",
       "R1 must be referenced or trusted", err=errno.EINVAL),
    _c("skb_ct_map", "r1 = MAP(hash)\nr2 = 0\nr3 = 0\nr4 = 0\nr5 = 0\n"
       "call KFUNC(bpf_skb_ct_alloc)\nr0 = 2\nexit",
       "kernel function bpf_skb_ct_alloc args#0 expected pointer to STRUCT __sk_buff but R1 "
       "has a pointer to STRUCT bpf_map", err=errno.EINVAL),
    _c("skb_ct_global", "r1 = 0\n" + _G1 + "if r1 == 0 goto out\nr2 = 0\n"
       "*(u64 *)(r10 -40) = r2\n*(u64 *)(r10 -32) = r2\n*(u64 *)(r10 -16) = r2\n"
       "*(u64 *)(r10 -8) = r2\n" + _CT_LOOKUP.replace("xdp_ct", "skb_ct") +
       "\nif r0 == 0 goto out\nr1 = r0\ncall KFUNC(bpf_ct_release)\nout:\nr0 = 0\nexit", None,
       funcs=_gt("struct:__sk_buff@trusted@nullable"), processed=26),
    # -- bpf_probe_read_{kernel,user}{,_str}_dynptr: an initialised dynptr, scalars, any
    # source
    _c("probe_dynptr_local", "r1 = 0\n*(u32 *)(r10 -4) = r1\nr2 = r10\nr2 += -4\n"
       "r1 = MAP(arr)\ncall 1\nif r0 == 0 goto out\nr1 = r0\nr2 = 16\nr3 = 0\nr4 = r10\n"
       "r4 += -24\ncall 197\nr1 = r10\nr1 += -24\nr2 = 0\nr3 = 8\nr4 = 0\n"
       "call KFUNC(bpf_probe_read_kernel_str_dynptr)\nout:\nr0 = 2\nexit", None),
    _c("probe_dynptr_uninit", _STACK_DYN + "r2 = 0\nr3 = 8\nr4 = 0\n"
       "call KFUNC(bpf_probe_read_user_dynptr)\nr0 = 2\nexit",
       "Expected an initialized dynptr as arg #0", err=errno.EINVAL),
    _c("probe_dynptr_off_ptr", "r2 = 0\nr3 = r10\nr3 += -16\n"
       "call KFUNC(bpf_dynptr_from_xdp)\nr1 = r10\nr1 += -16\nr2 = r10\nr3 = 8\nr4 = 0\n"
       "call KFUNC(bpf_probe_read_kernel_dynptr)\nr0 = 2\nexit", "R2 is not a scalar",
       err=errno.EINVAL),
)


# -- the task and cgroup kfuncs: references taken and given back, trusted and RCU arguments.
# Offsets of Linux 6.18's structs (this kernel's BTF, and the one pyxdp ships): task_struct
# pid 1264, real_parent 1280, parent 1288, comm 1752, cgroups 2376, size 3264; css_set
# dfl_cgrp 112; cgroup level 216, kn 256, ancestors 2224; kernfs_node id 96.
_TASK_GET = "r1 = 1\ncall KFUNC(bpf_task_from_pid)\nif r0 == 0 goto out\nr6 = r0\n"
_TASK_REL = "r1 = r6\ncall KFUNC(bpf_task_release)\n"
_CG_GET = "r1 = 1\ncall KFUNC(bpf_cgroup_from_id)\nif r0 == 0 goto out\nr6 = r0\n"
_CG_REL = "r1 = r6\ncall KFUNC(bpf_cgroup_release)\n"
_OUT = "out:\nr0 = 2\nexit"
_ACQ_REL = ("call KFUNC(bpf_task_acquire)\nif r0 == 0 goto rel\nr1 = r0\n"
            "call KFUNC(bpf_task_release)\nrel:\n")
_LEAK = "BPF_EXIT instruction in main prog would lead to reference leak"
_IT = "r1 = r10\nr1 += -24\n"
_IT_NEW = _IT + "r2 = 0\nr3 = 0\ncall KFUNC(bpf_iter_task_new)\n"
_IT_END = _IT + "call KFUNC(bpf_iter_task_destroy)\nr0 = 2\nexit"
_VMA_IT = "r1 = r10\nr1 += -8\n"
_VMA_NEW = _VMA_IT + "r2 = r6\nr3 = 0\ncall KFUNC(bpf_iter_task_vma_new)\n"
_VMA_END = _VMA_IT + "call KFUNC(bpf_iter_task_vma_destroy)\n"
_TASK_CASES: tuple[VerifierCase, ...] = (
    _c("task_ok", _TASK_GET + "r1 = *(u32 *)(r6 + 1264)\nr1 = *(u64 *)(r6 + 1752)\n" +
       _TASK_REL + _OUT, None),
    _c("task_leak", _TASK_GET + _OUT, _LEAK, err=errno.EINVAL),
    _c("task_maybe_null_rel", "r1 = 1\ncall KFUNC(bpf_task_from_pid)\nr1 = r0\n"
       "call KFUNC(bpf_task_release)\nr0 = 2\nexit",
       "Possibly NULL pointer passed to trusted arg0"),
    _c("task_twice", _TASK_GET + _TASK_REL + _TASK_REL + _OUT,
       "arg#0 pointer type STRUCT task_struct must point to scalar, or struct with scalar",
       err=errno.EINVAL),
    _c("task_use_after", _TASK_GET + _TASK_REL + "r1 = *(u32 *)(r6 + 1264)\n" + _OUT,
       "R6 invalid mem access 'scalar'"),
    _c("task_write", _TASK_GET + "r1 = 0\n*(u32 *)(r6 + 1264) = r1\n" + _TASK_REL + _OUT,
       "only read is supported"),
    _c("task_read_oob", _TASK_GET + "r1 = *(u32 *)(r6 + 3264)\n" + _TASK_REL + _OUT,
       "access beyond struct task_struct at off 3264 size 4"),
    # real_parent (and group_leader, cgroups) read from a trusted task is an RCU pointer,
    # parent is not; after bpf_rcu_read_unlock an RCU pointer is untrusted
    _c("task_real_parent_acq", _TASK_GET + "r1 = *(u64 *)(r6 + 1280)\n" + _ACQ_REL +
       _TASK_REL + _OUT, None),
    _c("task_rp_rp_acq", _TASK_GET + "r1 = *(u64 *)(r6 + 1280)\nr1 = *(u64 *)(r1 + 1280)\n" +
       _ACQ_REL + _TASK_REL + _OUT, None),
    _c("task_parent_acq", _TASK_GET + "r1 = *(u64 *)(r6 + 1288)\n" + _ACQ_REL + _TASK_REL +
       _OUT, "R1 must be a rcu pointer", err=errno.EINVAL),
    _c("task_rp_release", _TASK_GET + "r1 = *(u64 *)(r6 + 1280)\n"
       "call KFUNC(bpf_task_release)\n" + _TASK_REL + _OUT,
       "R1 must be referenced or trusted", err=errno.EINVAL),
    _c("task_rp_unlock_acq", _TASK_GET + "call KFUNC(bpf_rcu_read_lock)\n"
       "r7 = *(u64 *)(r6 + 1280)\ncall KFUNC(bpf_rcu_read_unlock)\nr1 = r7\n" + _ACQ_REL +
       _TASK_REL + _OUT, "R1 must be a rcu pointer", err=errno.EINVAL),
    _c("task_rp_unlock_read", _TASK_GET + "call KFUNC(bpf_rcu_read_lock)\n"
       "r7 = *(u64 *)(r6 + 1280)\ncall KFUNC(bpf_rcu_read_unlock)\n"
       "r1 = *(u32 *)(r7 + 1264)\n" + _TASK_REL + _OUT, None),
    _c("task_rel_off", _TASK_GET + "r1 = r6\nr1 += 8\ncall KFUNC(bpf_task_release)\n" + _OUT,
       "R1 must have zero offset when passed to release func or trusted arg to kfunc",
       err=errno.EINVAL),
    _c("task_acq_off", _TASK_GET + "r1 = r6\nr1 += 8\ncall KFUNC(bpf_task_acquire)\n" +
       _TASK_REL + _OUT, "kernel function bpf_task_acquire args#0 expected pointer to "
       "STRUCT task_struct but R1 has a pointer to STRUCT task_struct", err=errno.EINVAL),
    _c("task_pid_ptr", "r1 = r10\ncall KFUNC(bpf_task_from_pid)\n" + _OUT,
       "R1 is not a scalar", err=errno.EINVAL),
    _c("task_dfl_cgrp", _TASK_GET + "r1 = *(u64 *)(r6 + 2376)\nr1 = *(u64 *)(r1 + 112)\n"
       "call KFUNC(bpf_cgroup_acquire)\nif r0 == 0 goto rel\nr1 = r0\n"
       "call KFUNC(bpf_cgroup_release)\nrel:\n" + _TASK_REL + _OUT, None),
    _c("task_cg1", _TASK_GET + "r1 = r6\nr2 = 4\ncall KFUNC(bpf_task_get_cgroup1)\n"
       "if r0 == 0 goto rel\nr1 = r0\ncall KFUNC(bpf_cgroup_release)\nrel:\n" + _TASK_REL +
       _OUT, None),
    _c("task_cg1_leak", _TASK_GET + "r1 = r6\nr2 = 4\ncall KFUNC(bpf_task_get_cgroup1)\n" +
       _TASK_REL + _OUT, _LEAK, err=errno.EINVAL),
    _c("task_cg_rel_task", _TASK_GET + "r1 = r6\ncall KFUNC(bpf_cgroup_release)\n" + _OUT,
       "kernel function bpf_cgroup_release args#0 expected pointer to STRUCT cgroup but R1 "
       "has a pointer to STRUCT task_struct", err=errno.EINVAL),
    _c("task_under_rp", _CG_GET + "r7 = r6\n" + _TASK_GET.replace("goto out", "goto rel7") +
       "r1 = *(u64 *)(r6 + 1280)\nr2 = r7\ncall KFUNC(bpf_task_under_cgroup)\n" +
       _TASK_REL + "rel7:\nr1 = r7\ncall KFUNC(bpf_cgroup_release)\n" + _OUT, None),
    _c("cgroup_kn_id", _CG_GET + "r1 = *(u64 *)(r6 + 256)\nr1 = *(u64 *)(r1 + 96)\n"
       "r1 = *(u32 *)(r6 + 216)\n" + _CG_REL + _OUT, None),
    _c("cgroup_ancestor", _CG_GET + "r1 = r6\nr2 = 0\ncall KFUNC(bpf_cgroup_ancestor)\n"
       "if r0 == 0 goto rel\nr1 = r0\ncall KFUNC(bpf_cgroup_release)\nrel:\n" + _CG_REL +
       _OUT, None),
    _c("cgroup_ancestor_leak", _CG_GET + "r1 = r6\nr2 = 0\n"
       "call KFUNC(bpf_cgroup_ancestor)\n" + _CG_REL + _OUT, _LEAK, err=errno.EINVAL),
    _c("cgroup_ancestors", _CG_GET + "r1 = *(u64 *)(r6 + 2224)\n" + _CG_REL + _OUT,
       "struct cgroup doesn't have field at offset 2224", err=errno.EINVAL),
    _c("cgroup_kn_release", _CG_GET + "r1 = *(u64 *)(r6 + 256)\n"
       "call KFUNC(bpf_cgroup_release)\n" + _CG_REL + _OUT,
       "R1 must be referenced or trusted", err=errno.EINVAL),
    # bpf_send_signal_task takes a trusted task: not an RCU one
    _c("task_signal", _TASK_GET + "r1 = r6\nr2 = 10\nr3 = 0\nr4 = 0\n"
       "call KFUNC(bpf_send_signal_task)\n" + _TASK_REL + _OUT, None),
    _c("task_signal_parent", _TASK_GET + "r1 = *(u64 *)(r6 + 1280)\nr2 = 10\nr3 = 0\nr4 = 0\n"
       "call KFUNC(bpf_send_signal_task)\n" + _TASK_REL + _OUT,
       "R1 must be referenced or trusted", err=errno.EINVAL),
    # the task iterator: its tasks are RCU pointers; past bpf_rcu_read_unlock it is unusable
    *(_c(f"task_iter_{k}", _IT_NEW + body + _IT_END, v, **kw) for k, body, v, kw in (
        ("loop", "r6 = 0\nloop:\n" + _IT + "call KFUNC(bpf_iter_task_next)\n"
         "if r0 == 0 goto done\nr1 = *(u32 *)(r0 + 1264)\nr6 += r1\ngoto loop\ndone:\n",
         None, {}),
        ("release", _IT + "call KFUNC(bpf_iter_task_next)\nif r0 == 0 goto done\nr1 = r0\n"
         "call KFUNC(bpf_task_release)\ndone:\n", "R1 must be referenced or trusted",
         {"err": errno.EINVAL}),
        ("parent_acquire", _IT + "call KFUNC(bpf_iter_task_next)\nif r0 == 0 goto done\n"
         "r1 = *(u64 *)(r0 + 1280)\ncall KFUNC(bpf_task_acquire)\nif r0 == 0 goto done\n"
         "r1 = r0\ncall KFUNC(bpf_task_release)\ndone:\n", None, {}),
        ("unchecked", _IT + "call KFUNC(bpf_iter_task_next)\nr1 = *(u32 *)(r0 + 1264)\n",
         "R0 invalid mem access 'scalar'", {}),
        ("unlocked", "call KFUNC(bpf_rcu_read_lock)\ncall KFUNC(bpf_rcu_read_unlock)\n" + _IT +
         "call KFUNC(bpf_iter_task_next)\n",
         "expected an RCU CS when using bpf_iter_task_next", {"err": errno.EPROTO}))),
    _c("task_iter_leak", _IT_NEW + "r0 = 2\nexit", _LEAK, err=errno.EINVAL),
    _c("task_iter_own", _TASK_GET + _IT + "r2 = r6\nr3 = 2\ncall KFUNC(bpf_iter_task_new)\n" +
       _IT + "call KFUNC(bpf_iter_task_destroy)\n" + _TASK_REL + _OUT, None),
    _c("task_iter_parent", _TASK_GET + _IT + "r2 = *(u64 *)(r6 + 1280)\nr3 = 2\n"
       "call KFUNC(bpf_iter_task_new)\n" + _IT + "call KFUNC(bpf_iter_task_destroy)\n" +
       _TASK_REL + _OUT, "R2 must be referenced or trusted", err=errno.EINVAL),
    # the css iterator: a struct cgroup is its css (the first member); the css it gives
    # is an RCU pointer whose ->cgroup is one too
    *(_c(f"css_iter_{k}", _CG_GET + _IT + f"r2 = {start}\nr3 = 2\ncall KFUNC(bpf_iter_css_new)\n" +
         body + _IT + "call KFUNC(bpf_iter_css_destroy)\n" + _CG_REL + _OUT, v, **kw)
      for k, start, body, v, kw in (
        ("cgroup", "r6", _IT + "call KFUNC(bpf_iter_css_next)\nif r0 == 0 goto done\n"
         "r1 = *(u64 *)(r0 + 0)\ncall KFUNC(bpf_cgroup_acquire)\nif r0 == 0 goto done\n"
         "r1 = r0\ncall KFUNC(bpf_cgroup_release)\ndone:\n", None, {}),
        ("css_as_cgroup", "r6", _IT + "call KFUNC(bpf_iter_css_next)\nif r0 == 0 goto done\n"
         "r1 = r0\ncall KFUNC(bpf_cgroup_acquire)\ndone:\n",
         "kernel function bpf_cgroup_acquire args#0 expected pointer to STRUCT cgroup but R1 "
         "has a pointer to STRUCT cgroup_subsys_state", {"err": errno.EINVAL}),
        ("inner", "r6\nr2 += 8", "", "kernel function bpf_iter_css_new args#1 expected pointer "
         "to STRUCT cgroup_subsys_state but R2 has a pointer to STRUCT cgroup",
         {"err": errno.EINVAL}),
        ("kn", "*(u64 *)(r6 + 256)", "", "R2 must be referenced or trusted",
         {"err": errno.EINVAL}))),
    # the task VMA iterator: KF_RCU task, 8 stack bytes; the VMAs are trusted pointers
    # (vm_start 0, vm_mm 16, vm_flags 32, vm_file 88; 192 bytes)
    *(_c(f"task_vma_{k}", _TASK_GET + (new if new is not None else _VMA_NEW) + body +
         (_VMA_END if end else "") + _TASK_REL + _OUT, v, **kw)
      for k, new, body, end, v, kw in (
        ("loop", None, "loop:\n" + _VMA_IT + "call KFUNC(bpf_iter_task_vma_next)\n"
         "if r0 == 0 goto done\nr1 = *(u64 *)(r0 + 0)\nr1 = *(u64 *)(r0 + 32)\n"
         "r1 = *(u64 *)(r0 + 88)\ngoto loop\ndone:\n", True, None, {}),
        ("parent", _VMA_IT + "r2 = *(u64 *)(r6 + 1280)\nr3 = 0\n"
         "call KFUNC(bpf_iter_task_vma_new)\n", "", True, None, {}),
        ("untrusted", _VMA_IT + "r2 = *(u64 *)(r6 + 1288)\nr3 = 0\n"
         "call KFUNC(bpf_iter_task_vma_new)\n", "", True, "R2 must be a rcu pointer",
         {"err": errno.EINVAL}),
        ("null_task", _VMA_IT + "r2 = 0\nr3 = 0\ncall KFUNC(bpf_iter_task_vma_new)\n", "",
         True, "Possibly NULL pointer passed to trusted arg1", {}),
        ("leak", None, "", False, _LEAK, {"err": errno.EINVAL}),
        ("twice", None, _VMA_NEW, True, "expected uninitialized iter_task_vma as arg #0",
         {"err": errno.EINVAL}),
        ("uninit", "", _VMA_IT + "call KFUNC(bpf_iter_task_vma_next)\n", False,
         "expected an initialized iter_task_vma as arg #0", {"err": errno.EINVAL}),
        ("unchecked", None, _VMA_IT + "call KFUNC(bpf_iter_task_vma_next)\n"
         "r1 = *(u64 *)(r0 + 0)\n", True, "R0 invalid mem access 'scalar'", {}),
        ("write", None, _VMA_IT + "call KFUNC(bpf_iter_task_vma_next)\nif r0 == 0 goto d\n"
         "r1 = 0\n*(u64 *)(r0 + 0) = r1\nd:\n", True, "only read is supported", {}),
        ("oob", None, _VMA_IT + "call KFUNC(bpf_iter_task_vma_next)\nif r0 == 0 goto d\n"
         "r1 = *(u64 *)(r0 + 192)\nd:\n", True,
         "access beyond struct vm_area_struct at off 192 size 8", {}),
        ("unlocked", None, "call KFUNC(bpf_rcu_read_lock)\ncall KFUNC(bpf_rcu_read_unlock)\n" +
         _VMA_IT + "call KFUNC(bpf_iter_task_vma_next)\n", True, None, {}),
        ("as_task", None, _VMA_IT + "call KFUNC(bpf_iter_task_vma_next)\nif r0 == 0 goto d\n"
         "r1 = r0\ncall KFUNC(bpf_task_acquire)\nd:\n", True,
         "kernel function bpf_task_acquire args#0 expected pointer to STRUCT task_struct but "
         "R1 has a pointer to STRUCT vm_area_struct", {"err": errno.EINVAL}),
        ("mm_deref", None, _VMA_IT + "call KFUNC(bpf_iter_task_vma_next)\nif r0 == 0 goto d\n"
         "r1 = *(u64 *)(r0 + 16)\nr1 = *(u64 *)(r1 + 0)\nd:\n", True,
         "access beyond struct (anon) at off 0 size 8", {}))),
    # a cgroup's task iterator: never made by an XDP program, so never used
    _c("css_task_iter_new", "r1 = r10\nr1 += -8\nr2 = r1\nr3 = 0\n"
       "call KFUNC(bpf_iter_css_task_new)\nr0 = 2\nexit",
       "css_task_iter is only allowed in bpf_lsm, bpf_iter and sleepable progs",
       err=errno.EINVAL),
    *(_c(f"css_task_iter_{k}", f"r1 = r10\nr1 += -8\ncall KFUNC(bpf_iter_css_task_{k})\n"
         "r0 = 2\nexit", "expected an initialized iter_css_task as arg #0", err=errno.EINVAL)
      for k in ("next", "destroy")),
)


# -- bpf_lookup_system_key / bpf_key_put: a referenced struct bpf_key (key 0, has_ref 8, size
# 16), released by bpf_key_put; its key member is an untrusted struct key pointer
_KEY_GET = "r1 = 0\ncall KFUNC(bpf_lookup_system_key)\nif r0 == 0 goto out\nr6 = r0\n"
_KEY_PUT = "r1 = r6\ncall KFUNC(bpf_key_put)\n"
_KEY_CASES: tuple[VerifierCase, ...] = (
    _c("key_ok", _KEY_GET + "r1 = *(u64 *)(r6 + 0)\nr1 = *(u8 *)(r6 + 8)\n" + _KEY_PUT + _OUT,
       None),
    _c("key_leak", _KEY_GET + _OUT, _LEAK, err=errno.EINVAL),
    _c("key_null_put", "r1 = 0\ncall KFUNC(bpf_lookup_system_key)\nr1 = r0\n"
       "call KFUNC(bpf_key_put)\nr0 = 2\nexit", "Possibly NULL pointer passed to trusted arg0"),
    _c("key_put_twice", _KEY_GET + _KEY_PUT + _KEY_PUT + _OUT,
       "arg#0 pointer type STRUCT bpf_key must point to scalar, or struct with scalar",
       err=errno.EINVAL),
    _c("key_write", _KEY_GET + "r1 = 0\n*(u8 *)(r6 + 8) = r1\n" + _KEY_PUT + _OUT,
       "only read is supported"),
    _c("key_oob", _KEY_GET + "r1 = *(u8 *)(r6 + 16)\n" + _KEY_PUT + _OUT,
       "access beyond struct bpf_key at off 16 size 1"),
    _c("key_off", _KEY_GET + "r1 = r6\nr1 += 8\ncall KFUNC(bpf_key_put)\n" + _OUT,
       "R1 must have zero offset when passed to release func or trusted arg to kfunc",
       err=errno.EINVAL),
    _c("key_ptr_id", "r1 = r10\ncall KFUNC(bpf_lookup_system_key)\nr0 = 2\nexit",
       "R1 is not a scalar", err=errno.EINVAL),
    _c("key_put_task", _TASK_GET + "r1 = r6\ncall KFUNC(bpf_key_put)\n" + _OUT,
       "kernel function bpf_key_put args#0 expected pointer to STRUCT bpf_key but R1 has a "
       "pointer to STRUCT task_struct", err=errno.EINVAL),
)


# -- bpf_get_kmem_cache: an untrusted struct kmem_cache pointer (never NULL to the verifier)
# that may be read (size 32, object_size 36, name 104, node 224; 8416 bytes)
_KC = "r1 = 0\ncall KFUNC(bpf_get_kmem_cache)\n"
_KMEM_CACHE_CASES: tuple[VerifierCase, ...] = (
    _c("kmem_cache_read", _KC + "r1 = *(u32 *)(r0 + 36)\nr0 = 2\nexit", None),
    _c("kmem_cache_name", _KC + "if r0 == 0 goto out\nr1 = *(u64 *)(r0 + 104)\n"
       "r1 = *(u8 *)(r1 + 0)\n" + _OUT, None),
    _c("kmem_cache_name_write", _KC + "r1 = *(u64 *)(r0 + 104)\nr2 = 0\n*(u8 *)(r1 + 0) = r2\n"
       "r0 = 2\nexit", "R1 cannot write into rdonly_untrusted_mem"),
    _c("kmem_cache_name_half", _KC + "r1 = *(u32 *)(r0 + 104)\nr0 = 2\nexit",
       "cannot access ptr member name with moff 104 in struct kmem_cache with off 104 size 4"),
    _c("kmem_cache_hole", _KC + "r1 = *(u64 *)(r0 + 100)\nr0 = 2\nexit",
       "struct kmem_cache doesn't have field at offset 100", err=errno.EINVAL),
    _c("kmem_cache_oob", _KC + "r1 = *(u32 *)(r0 + 8416)\nr0 = 2\nexit",
       "access beyond struct kmem_cache at off 8416 size 4"),
    _c("kmem_cache_neg", _KC + "r1 = *(u32 *)(r0 - 8)\nr0 = 2\nexit",
       "R0 is ptr_kmem_cache invalid negative access: off=-8"),
    _c("kmem_cache_write", _KC + "r1 = 0\n*(u32 *)(r0 + 32) = r1\nr0 = 2\nexit",
       "only read is supported"),
    _c("kmem_cache_release", _KC + "r1 = r0\ncall KFUNC(bpf_task_release)\nr0 = 2\nexit",
       "R1 must be referenced or trusted", err=errno.EINVAL),
    _c("kmem_cache_acquire", _KC + "r1 = r0\ncall KFUNC(bpf_task_acquire)\nr0 = 2\nexit",
       "R1 must be a rcu pointer", err=errno.EINVAL),
    _c("kmem_cache_ptr_addr", "r1 = r10\ncall KFUNC(bpf_get_kmem_cache)\nr0 = 2\nexit",
       "R1 is not a scalar", err=errno.EINVAL),
)


# -- bpf_cgroup_read_xattr(cgroup, name__str, value_p): a trusted or RCU cgroup, a string
# of read-only array data (the rodata map), an initialised dynptr (of the packet here)
_XA_DP = "r1 = r7\nr2 = 0\nr3 = r10\nr3 += -48\ncall KFUNC(bpf_dynptr_from_xdp)\n"


def _xattr(name: str, cgroup: str = "r1 = r6\n", dynptr: str = "r3 = r10\nr3 += -48\n"
           ) -> str:
    return ("r7 = r1\n" + _CG_GET + _XA_DP + name + cgroup + dynptr +
            "call KFUNC(bpf_cgroup_read_xattr)\n" + _CG_REL + _OUT)


_XATTR_CASES: tuple[VerifierCase, ...] = (
    _c("xattr_ok", _xattr("r2 = MAP(rodata)\nr2 += 16\n"), None),
    _c("xattr_unterminated", _xattr("r2 = MAP(rodata)\nr2 += 54\n"),
       "string is not zero-terminated", err=errno.EINVAL),
    _c("xattr_stack_name", _xattr("*(u64 *)(r10 - 56) = 0\nr2 = r10\nr2 += -56\n"),
       "arg#1 doesn't point to a const string", err=errno.EINVAL),
    _c("xattr_null_name", _xattr("r2 = 0\n"), "Possibly NULL pointer passed to trusted arg1"),
    _c("xattr_var_name", _xattr("call 7\nr0 &= 7\nr2 = MAP(rodata)\nr2 += r0\n"),
       "R2 is not a constant address'"),
    _c("xattr_rw_name", "r7 = r1\n" + _CG_GET + _XA_DP + "*(u32 *)(r10 - 4) = 0\n"
       "r1 = MAP(arr)\nr2 = r10\nr2 += -4\ncall 1\nif r0 == 0 goto rel\nr2 = r0\n"
       "r1 = r6\nr3 = r10\nr3 += -48\ncall KFUNC(bpf_cgroup_read_xattr)\nrel:\n" + _CG_REL +
       _OUT, "R2 does not point to a readonly map'"),
    _c("xattr_no_dynptr", _xattr("r2 = MAP(rodata)\n", dynptr="r3 = r10\nr3 += -64\n"),
       "Expected an initialized dynptr as arg #2", err=errno.EINVAL),
    _c("xattr_kn", _xattr("r2 = MAP(rodata)\n", cgroup="r1 = *(u64 *)(r6 + 256)\n"),
       "kernel function bpf_cgroup_read_xattr args#0 expected pointer to STRUCT cgroup but "
       "R1 has a pointer to STRUCT kernfs_node", err=errno.EINVAL),
    # the task's cgroup through task->cgroups->dfl_cgrp is an RCU pointer: KF_RCU takes it
    _c("xattr_task_cgroup", "r7 = r1\n" + _TASK_GET + _XA_DP + "r1 = *(u64 *)(r6 + 2376)\n"
       "r1 = *(u64 *)(r1 + 112)\nr2 = MAP(rodata)\nr3 = r10\nr3 += -48\n"
       "call KFUNC(bpf_cgroup_read_xattr)\n" + _TASK_REL + _OUT, None),
    _c("xattr_unlocked_cgroup", "r7 = r1\n" + _TASK_GET + _XA_DP +
       "call KFUNC(bpf_rcu_read_lock)\nr1 = *(u64 *)(r6 + 2376)\nr8 = *(u64 *)(r1 + 112)\n"
       "call KFUNC(bpf_rcu_read_unlock)\nr1 = r8\nr2 = MAP(rodata)\nr3 = r10\nr3 += -48\n"
       "call KFUNC(bpf_cgroup_read_xattr)\n" + _TASK_REL + _OUT,
       "R1 must be a rcu pointer", err=errno.EINVAL),
)


# r0 random, masked to multiples of 4 up to 60, bounded to [lo, hi], then tested to be v.
_TSTEP = """call bpf_get_prandom_u32
r0 &= 0x3c
if r0 < {lo} goto out
{hi}if r0 != {v} goto bad
r0 = 2
exit
out:
r0 = 1
exit
bad:
r0 = *(u64 *)(r10 +8)
exit"""

# Two paths into a tail call with constant indexes k1 and k0, long enough for a
# checkpoint at t.
_TKEY = """r6 = r1
call bpf_get_prandom_u32
r7 = r0
r8 = r0
if r7 > 5 goto j1
r8 += 1
j1:
if r7 > 7 goto j2
r8 += 2
j2:
if r0 == 0 goto a
r3 = {k1}
r4 = 1
r5 = 2
r4 += r5
goto t
a:
r3 = {k0}
r4 = 1
r5 = 2
r4 += r5
t:
r1 = r6
r2 = MAP(progs)
r4 = 0
r5 = 0
r7 = 0
r8 = 0
r9 = 0
if r9 > 3 goto e
call 12
e:
r0 = 2
exit"""

# r4 = data + 8 compared with data_end (cmp): where it is past the end, r4 + n checked
# again and r4 read.
_PKT_END_AGAIN = """r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 8
if r4 {cmp} r3 goto past
r0 = 1
exit
past:
r5 = r4
r5 += {n}
if r5 > r3 goto out
r0 = *({sz} *)(r4 +0)
out:
r0 = 2
exit"""

CASES: tuple[VerifierCase, ...] = (
    # -- returns and registers ---------------------------------------------------------------
    _c("ret_const", "r0 = 2\nexit", None),
    _c("ret_uninit", "exit", "R0 !read_ok"),
    _c("read_uninit_reg", "r0 = r2\nexit", "R2 !read_ok"),
    _c("ret_pointer", "r0 = r1\nexit", None),
    _c("ret_big", "r0 = 1000\nexit", None),
    _c("fp_write", "r10 = 0\nr0 = 0\nexit", "frame pointer is read only"),
    _c("mov32_pointer", "w0 = w1\nexit", None),
    # -- packet bounds -----------------------------------------------------------------------
    _c("pkt_unchecked", _PKT + "r0 = *(u16 *)(r2 +12)\nexit", "R2 offset is outside of the packet"),
    _c("pkt_checked", _PKT + """
r4 = r2
r4 += 14
if r4 > r3 goto +2
r0 = *(u16 *)(r2 +12)
exit
r0 = 1
exit""", None),
    _c("pkt_off_by_one", _PKT + """
r4 = r2
r4 += 13
if r4 > r3 goto +2
r0 = *(u16 *)(r2 +12)
exit
r0 = 1
exit""", "R2 offset is outside of the packet"),
    _c("pkt_wrong_branch", _PKT + """
r4 = r2
r4 += 14
if r4 > r3 goto +2
r0 = 1
exit
r0 = *(u16 *)(r2 +12)
exit""", "R2 offset is outside of the packet"),
    _c("pkt_lt_open", _PKT + """
r4 = r2
r4 += 14
if r4 < r3 goto +2
r0 = 1
exit
r0 = *(u8 *)(r2 +14)
exit""", None),
    _c("pkt_ge_open", _PKT + """
r4 = r2
r4 += 14
if r4 >= r3 goto +2
r0 = *(u8 *)(r2 +14)
exit
r0 = 1
exit""", None),
    _c("pkt_end_lt_reverse", _PKT + """
r4 = r2
r4 += 14
if r3 < r4 goto +2
r0 = *(u16 *)(r4 -2)
exit
r0 = 1
exit""", None),
    _c("pkt_read_past_check", _PKT + """
r4 = r2
r4 += 14
if r4 > r3 goto +2
r0 = *(u8 *)(r4 +0)
exit
r0 = 1
exit""", "R4 offset is outside of the packet"),
    _c("pkt_var_checked", _PKT + """
r5 = *(u8 *)(r2 +0)
r0 = 1
exit""", "R2 offset is outside of the packet"),
    _c("pkt_var_offset", _PKT + """
r4 = r2
r4 += 1
if r4 > r3 goto +8
r5 = *(u8 *)(r2 +0)
r5 &= 15
r2 += r5
r4 = r2
r4 += 4
if r4 > r3 goto +2
r0 = *(u32 *)(r2 +0)
exit
r0 = 1
exit""", None),
    _c("pkt_var_unchecked", _PKT + """
r4 = r2
r4 += 1
if r4 > r3 goto +4
r5 = *(u8 *)(r2 +0)
r2 += r5
r0 = *(u8 *)(r2 +0)
exit
r0 = 1
exit""", "R2 offset is outside of the packet"),
    _c("pkt_write", _PKT + """
r4 = r2
r4 += 6
r0 = 1
if r4 > r3 goto +2
*(u16 *)(r2 +4) = 7
r0 = 3
exit""", None),
    _c("pkt_beyond_end_dead_branch", _PKT + """
r4 = r2
r4 += 14
if r4 > r3 goto beyond
r0 = 1
exit
beyond:
if r4 > r3 goto out
r0 = *(u64 *)(r10 +8)
exit
out:
r0 = 2
exit""", None),
    _c("pkt_beyond_end_ge_decided", _PKT + """
r4 = r2
r4 += 14
if r4 > r3 goto beyond
r0 = 1
exit
beyond:
if r4 >= r3 goto out
r0 = *(u64 *)(r10 +8)
exit
out:
r0 = 2
exit""", None),
    _c("pkt_at_end_gt_undecided", _PKT + """
r4 = r2
r4 += 14
if r4 < r3 goto ok
if r4 > r3 goto out
r0 = *(u64 *)(r10 +8)
exit
out:
r0 = 2
exit
ok:
r0 = 1
exit""", "invalid read from stack R10 off=8 size=8"),
    # A pointer compared at (>=) or beyond (>) data_end fails every access with -EINVAL,
    # as do its copies and spills made after the comparison; arithmetic (even += 0) makes
    # it an ordinary pointer with range 0 (-EACCES), as are copies made before.
    _c("pkt_beyond_end_read", _PKT_BEYOND + "r0 = *(u8 *)(r4 -1)\nexit",
       "R4 offset is outside of the packet", err=errno.EINVAL),
    _c("pkt_at_end_read", _PKT + """
r4 = r2
r4 += 14
if r4 >= r3 goto at
r0 = 1
exit
at:
r0 = *(u8 *)(r4 -1)
exit""", "R4 offset is outside of the packet", err=errno.EINVAL),
    _c("pkt_end_lt_beyond_read", _PKT + """
r4 = r2
r4 += 14
if r3 < r4 goto beyond
r0 = 1
exit
beyond:
r0 = *(u8 *)(r4 -1)
exit""", "R4 offset is outside of the packet", err=errno.EINVAL),
    _c("pkt_beyond_end_copy_after", _PKT_BEYOND + "r5 = r4\nr0 = *(u8 *)(r5 +0)\nexit",
       "R5 offset is outside of the packet", err=errno.EINVAL),
    _c("pkt_beyond_end_spill", _PKT_BEYOND + """
*(u64 *)(r10 -8) = r4
r4 = *(u64 *)(r10 -8)
r0 = *(u8 *)(r4 +0)
exit""", "R4 offset is outside of the packet", err=errno.EINVAL),
    _c("pkt_beyond_end_helper_key", _PKT_BEYOND + """
r2 = r4
r1 = MAP(hash)
call 1
r0 = 1
exit""", "R2 offset is outside of the packet", err=errno.EINVAL),
    _c("pkt_beyond_end_other_ptr", _PKT_BEYOND + "r0 = *(u8 *)(r2 +0)\nexit",
       "R2 offset is outside of the packet"),
    _c("pkt_beyond_end_copy_before", _PKT + """
r4 = r2
r4 += 14
r5 = r4
if r4 > r3 goto beyond
r0 = 1
exit
beyond:
r0 = *(u8 *)(r5 -1)
exit""", "R5 offset is outside of the packet"),
    _c("pkt_beyond_end_add0", _PKT_BEYOND + "r4 += 0\nr0 = *(u8 *)(r4 +0)\nexit",
       "R4 offset is outside of the packet"),
    _c("pkt_beyond_end_add_reg", _PKT_BEYOND + "r5 = 0\nr4 += r5\nr0 = *(u8 *)(r4 +0)\nexit",
       "R4 offset is outside of the packet"),
    _c("pkt_beyond_end_helper_sub", _PKT_BEYOND + """
r2 = r4
r2 += -4
r1 = MAP(hash)
call 1
r0 = 1
exit""", "R2 offset is outside of the packet"),
    _c("pkt_beyond_end_back_rechecked", _PKT_BEYOND + """
r4 += -14
r5 = r4
r5 += 2
if r5 > r3 goto +2
r0 = *(u8 *)(r4 +1)
exit
r0 = 0
exit""", None),
    _c("ctx_null_branch", """
if r1 == 0 goto null
r0 = 2
exit
null:
r0 = *(u64 *)(r1 +0)
exit""", "invalid bpf_context access off=0 size=8"),
    _c("stack_ptr_null_branch", """
r2 = r10
if r2 != 0 goto out
r0 = *(u64 *)(r10 +8)
exit
out:
r0 = 2
exit""", "invalid read from stack R10 off=8 size=8"),
    _c("pkt_end_read", _PKT + "r0 = *(u8 *)(r3 +0)\nexit", "R3 invalid mem access 'pkt_end'"),
    _c("pkt_end_arith", _PKT + "r3 += 1\nr0 = 0\nexit",
       "R3 pointer arithmetic on pkt_end prohibited"),
    _c("pkt_meta_unchecked", "r2 = *(u32 *)(r1 +8)\nr0 = *(u8 *)(r2 +0)\nexit",
       "R2 offset is outside of the packet"),
    _c("pkt_meta_checked", """
r2 = *(u32 *)(r1 +8)
r3 = *(u32 *)(r1 +0)
r4 = r2
r4 += 4
if r4 > r3 goto +2
r0 = *(u32 *)(r2 +0)
exit
r0 = 2
exit""", None),
    _c("pkt_after_adjust_head", _PKT + """
r6 = r2
r4 = r2
r4 += 14
if r4 > r3 goto +4
r2 = 0
call 44
r0 = *(u8 *)(r6 +0)
exit
r0 = 1
exit""", "R6 invalid mem access 'scalar'"),
    _c("pkt_spill_fill", _PKT + """
*(u64 *)(r10 -8) = r2
r4 = r2
r4 += 2
if r4 > r3 goto +3
r5 = *(u64 *)(r10 -8)
r0 = *(u16 *)(r5 +0)
exit
r0 = 1
exit""", None),
    # -- context -----------------------------------------------------------------------------
    _c("ctx_write", "r2 = 1\n*(u32 *)(r1 +0) = r2\nr0 = 0\nexit",
       "invalid bpf_context access off=0 size=4"),
    _c("ctx_st_imm", "*(u32 *)(r1 +0) = 1\nr0 = 0\nexit",
       "invalid bpf_context access off=0 size=4"),
    _c("ctx_narrow", "r0 = *(u8 *)(r1 +12)\nexit", "invalid bpf_context access off=12 size=1"),
    _c("ctx_past_end", "r0 = *(u32 *)(r1 +24)\nexit", "invalid bpf_context access off=24 size=4"),
    _c("ctx_u64", "r0 = *(u64 *)(r1 +0)\nexit", "invalid bpf_context access off=0 size=8"),
    _c("ctx_egress_xdp", "r0 = *(u32 *)(r1 +20)\nexit", "invalid bpf_context access off=20 size=4"),
    _c("ctx_egress_devmap", "r0 = *(u32 *)(r1 +20)\nexit", None, devmap=True),
    _c("ctx_modified", "r1 += 4\nr0 = *(u32 *)(r1 +0)\nexit",
       "dereference of modified ctx ptr R1 off=4 disallowed"),
    _c("ctx_rxq", "r0 = *(u32 *)(r1 +16)\nexit", None),
    # sign-extending loads (BPF_MEMSX): of a scalar field only, never of a packet pointer
    _c("ctx_ldsx_data", "r0 = *(s32 *)(r1 +0)\nexit", "invalid bpf_context access off=0 size=4"),
    _c("ctx_ldsx_data_end", "r0 = *(s32 *)(r1 +4)\nexit",
       "invalid bpf_context access off=4 size=4"),
    _c("ctx_ldsx_data_meta", "r0 = *(s32 *)(r1 +8)\nexit",
       "invalid bpf_context access off=8 size=4"),
    _c("ctx_ldsx_ifindex", "r0 = *(s32 *)(r1 +12)\nr0 &= 3\nexit", None),
    _c("ctx_ldsx_rxq", "r0 = *(s32 *)(r1 +16)\nr0 &= 3\nexit", None),
    _c("ctx_ldsx_narrow", "r0 = *(s16 *)(r1 +12)\nexit",
       "invalid bpf_context access off=12 size=2"),
    _c("ctx_ldsx_egress_devmap", "r0 = *(s32 *)(r1 +20)\nr0 &= 3\nexit", None, devmap=True),
    # -- stack -------------------------------------------------------------------------------
    _c("stack_uninit_read", "r0 = *(u64 *)(r10 -8)\nexit", None),
    _c("stack_above_fp", "r2 = 1\n*(u64 *)(r10 +0) = r2\nr0 = 0\nexit",
       "invalid write to stack R10 off=0 size=8"),
    # an access starting in the frame and running past its top is -EINVAL, else -EACCES
    _c("stack_var_straddle", """
r4 = *(u32 *)(r1 +12)
r4 &= 8
r2 = r10
r2 += -8
r2 += r4
r0 = *(u64 *)(r2 +0)
exit""", "invalid variable-offset read from stack R2 var_off=(0x0; 0x8) off=-8 size=8",
       err=errno.EINVAL),
    _c("stack_var_below", """
r4 = *(u32 *)(r1 +12)
r4 &= 8
r2 = r10
r2 += -520
r2 += r4
r0 = *(u64 *)(r2 +0)
exit""", "invalid variable-offset read from stack R2 var_off=(0x0; 0x8) off=-520 size=8"),
    _c("stack_too_deep", "r0 = *(u64 *)(r10 -520)\nexit",
       "invalid read from stack R10 off=-520 size=8"),
    _c("stack_misaligned", "r2 = 1\n*(u32 *)(r10 -6) = r2\nr0 = 0\nexit",
       "misaligned stack access off 0+0+-6 size 4"),
    _c("stack_fill_partial_ptr", "*(u64 *)(r10 -8) = r1\nr0 = *(u32 *)(r10 -8)\nexit",
       "invalid size of register fill"),
    _c("stack_spill_partial_ptr", "*(u32 *)(r10 -8) = r1\nr0 = 0\nexit",
       "invalid size of register spill"),
    _c("stack_spill_ctx", """
*(u64 *)(r10 -16) = r1
r1 = 0
r1 = *(u64 *)(r10 -16)
r0 = *(u32 *)(r1 +16)
exit""", None),
    _c("stack_sub_ptr", "r2 = r10\nr3 = 8\nr2 -= r3\nr0 = 0\nexit",
       "R2 subtraction from stack pointer prohibited"),
    _c("stack_narrow_spill", """
r2 = 7
*(u32 *)(r10 -8) = r2
r3 = *(u32 *)(r10 -8)
r0 = r3
exit""", None),
    # -- pointer arithmetic ------------------------------------------------------------------
    _c("ptr_mul", _PKT + "r2 *= 2\nr0 = 0\nexit",
       "R2 pointer arithmetic with *= operator prohibited"),
    _c("ptr_and", _PKT + "r2 &= 2\nr0 = 0\nexit", "R2 bitwise operator &= on pointer prohibited"),
    _c("ptr_add_ptr", _PKT + "r2 += r3\nr0 = 0\nexit", "R2 pointer += pointer prohibited"),
    _c("ptr_sub_ptr", _PKT + "r3 -= r2\nr0 = r3\nexit", None),
    _c("ptr_add32", _PKT + "w2 += 1\nr0 = 0\nexit", "R2 32-bit pointer arithmetic prohibited"),
    _c("ptr_sub32", _PKT + "w3 -= w2\nr0 = r3\nexit", None),
    _c("scalar_minus_ptr", _PKT + "r4 = 0\nr4 -= r2\nr0 = 0\nexit",
       "R4 tried to subtract pointer from scalar"),
    _c("deref_scalar", "r2 = 0\nr0 = *(u64 *)(r2 +0)\nexit", "R2 invalid mem access 'scalar'"),
    _c("ptr_unbounded_add", _PKT + """
r4 = *(u32 *)(r1 +12)
r4 <<= 32
r4 s>>= 32
r2 += r4
r0 = 0
exit""", "value -2147483648 makes pkt pointer be out of bounds", err=errno.EINVAL),
    _c("ptr_unbounded_min", _PKT + """
r4 = *(u32 *)(r1 +12)
r4 <<= 32
r4 s>>= 32
r4 *= r4
r2 += r4
r0 = 0
exit""", "value -4611686016279904256 makes pkt pointer be out of bounds", err=errno.EINVAL),
    # check_reg_sane_offset refuses with -EINVAL
    _c("ctx_add_u32max", """
r2 = 1
r2 <<= 32
r2 -= 1
r1 += r2
r0 = 0
exit""", "math between ctx pointer and 4294967295 is not allowed", err=errno.EINVAL),
    _c("pkt_off_too_big", _PKT + "r2 += 536870911\nr2 += 1\nr0 = 0\nexit",
       "pkt pointer offset 536870912 is not allowed", err=errno.EINVAL),
    _c("pkt_add_unbounded", _PKT + "r4 = r3\nr4 -= r2\nr2 += r4\nr0 = 0\nexit",
       "math between pkt pointer and register with unbounded min value is not allowed",
       err=errno.EINVAL),
    _c("pkt_sub_unbounded", _PKT + "r4 = r3\nr4 -= r2\nr2 -= r4\nr0 = 0\nexit",
       "math between pkt pointer and register with unbounded min value is not allowed",
       err=errno.EINVAL),
    _c("map_value_add_big", _LOOKUP.format(m="arr") + """
if r0 == 0 goto +3
r1 = 1
r1 <<= 30
r0 += r1
r0 = 0
exit""", "math between map_value pointer and 1073741824 is not allowed", err=errno.EINVAL),
    # -- ALU ---------------------------------------------------------------------------------
    _c("div_zero_imm", "r0 = 1\nr0 /= 0\nexit", "div by zero", err=errno.EINVAL),
    _c("div_zero_reg", "r0 = 1\nr1 = 0\nr0 /= r1\nexit", None),
    _c("shift_64", "r0 = 1\nr0 <<= 64\nexit", "invalid shift 64", err=errno.EINVAL),
    _c("shift32_32", "w0 = 1\nw0 >>= 32\nexit", "invalid shift 32", err=errno.EINVAL),
    # -- control flow ------------------------------------------------------------------------
    _c("unreachable", "r0 = 0\nexit\nr0 = 1\nexit", "unreachable insn 2", err=errno.EINVAL),
    _c("infinite_loop", "r0 = 0\nif r0 == 0 goto -1\nexit", "infinite loop detected at insn 1",
       err=errno.EINVAL),
    _c("bounded_loop", """
r1 = 0
r1 += 1
if r1 < 10 goto -2
r0 = 2
exit""", None),
    _c("dead_branch_error", """
r1 = 5
if r1 > 10 goto +2
r0 = 1
exit
r0 = *(u64 *)(r1 +0)
exit""", None),
    _c("jmp32_bounds", _LOOKUP.format(m="arr") + """
if r0 == 0 goto +6
r1 = *(u32 *)(r1 +0)
w2 = *(u32 *)(r10 -8)
if w2 > 3 goto +3
r2 <<= 2
r0 += r2
r0 = *(u32 *)(r0 +0)
exit""", "R1 !read_ok"),
    # A 32-bit load of a 4-byte spill keeps the subregister's bounds (coerce_reg_to_size
    # forgets them only below 4 bytes): w2 s> 4 is never taken, its branch not walked.
    _c("fill32_keeps_s32", """
call 7
if w0 s> 4 goto +8
if w0 s< -4 goto +7
*(u32 *)(r10 -8) = r0
r2 = *(u32 *)(r10 -8)
if w2 s> 4 goto +2
r0 = 2
exit
r0 = 1
exit
r0 = 3
exit""", None, processed=11),
    # An s32 range crossing the sign boundary beside a u32 range that ends before its
    # negative part: both become the u32 range's start up to S32_MAX, so after 15 rounds
    # "w0 s< w1" is always taken (selftests' verifier_bounds.c,
    # crossing_32_bit_signed_boundary_2; the walk's length pins the deduction).
    _c("s32_crossing_sign_boundary", """r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r1 = r2
r1 += 1
if r1 > r3 goto out
r1 = *(u8 *)(r2 +0)
w0 = 0x7fffff10
w1 += w0
w2 = 0x80000fff
w0 = 0x80000000
loop:
w0 += 1
if w0 s> w2 goto out
if w0 s< w1 goto loop
r0 = 1
exit
out:
r0 = 0
exit""", None, processed=12330),
    # A u64 range meeting the tnum in one value makes the scalar that value
    # (__update_reg64_bounds with tnum_step): r0 & 0x3c is a multiple of 4 up to 60, so
    # [57, 60] holds only 60 (the tnum's maximum) and [53, 58] only 56 (between the
    # ends); the dead "!= value" branch is never walked. [52, 58] holds 52 and 56: it is.
    _c("tnum_range_meet_tmax", _TSTEP.format(lo=57, hi="", v=60), None, processed=8),
    _c("tnum_range_meet_between", _TSTEP.format(lo=53, hi="if r0 > 58 goto out\n", v=56),
       None, processed=10),
    _c("tnum_range_meet_two", _TSTEP.format(lo=52, hi="if r0 > 58 goto out\n", v=56),
       "invalid read from stack R10 off=8 size=8"),
    # A loop counted up to such a bound: every "r6 < r0" taken narrows r0 until one
    # value is left, whose last rounds are then walked once (eunomia's xdp-tcpdump).
    _c("tnum_range_meet_loop", """call bpf_get_prandom_u32
r0 &= 0x3c
r6 = 0
loop:
r6 += 1
if r6 < r0 goto loop
r0 = 2
exit""", None, processed=237),
    # -- maps --------------------------------------------------------------------------------
    _c("map_unchecked", _LOOKUP.format(m="hash") + "r0 = *(u64 *)(r0 +0)\nexit",
       "R0 invalid mem access 'map_value_or_null'"),
    _c("map_checked", _LOOKUP.format(m="hash") + """
if r0 == 0 goto +2
r0 = *(u64 *)(r0 +0)
exit
r0 = 1
exit""", None),
    _c("map_checked_copy", _LOOKUP.format(m="hash") + """
r6 = r0
if r0 == 0 goto +2
r0 = *(u64 *)(r6 +0)
exit
r0 = 1
exit""", None),
    _c("map_null_branch", _LOOKUP.format(m="hash") + """
if r0 != 0 goto +2
r0 = *(u64 *)(r0 +0)
exit
r0 = 1
exit""", "R0 invalid mem access 'scalar'"),
    _c("map_value_oob", _LOOKUP.format(m="hash") + """
if r0 == 0 goto +2
r0 = *(u64 *)(r0 +8)
exit
r0 = 1
exit""", "R0 min value is outside of the allowed memory range"),
    _c("map_null_arith", _LOOKUP.format(m="hash") + "r0 += 4\nr0 = 0\nexit",
       "R0 pointer arithmetic on map_value_or_null prohibited, null-check it first"),
    _c("map_var_index_ok", _LOOKUP.format(m="arr") + """
if r0 == 0 goto +6
r2 = *(u32 *)(r0 +0)
if r2 > 3 goto +4
r2 <<= 2
r0 += r2
r0 = *(u32 *)(r0 +0)
exit
r0 = 1
exit""", None),
    _c("map_var_index_unbounded", _LOOKUP.format(m="arr") + """
if r0 == 0 goto +4
r2 = *(u32 *)(r0 +0)
r0 += r2
r0 = *(u32 *)(r0 +0)
exit
r0 = 1
exit""", "R0 unbounded memory access, make sure to bounds check any such access"),
    _c("map_var_index_off_by_one", _LOOKUP.format(m="arr") + """
if r0 == 0 goto +6
r2 = *(u32 *)(r0 +0)
if r2 > 4 goto +4
r2 <<= 2
r0 += r2
r0 = *(u32 *)(r0 +0)
exit
r0 = 1
exit""", "R0 max value is outside of the allowed memory range"),
    _c("map_var_index_signed", _LOOKUP.format(m="arr") + """
if r0 == 0 goto +7
r2 = *(u32 *)(r0 +0)
r2 <<= 32
r2 s>>= 32
if r2 s> 3 goto +3
r0 += r2
r0 = *(u8 *)(r0 +0)
exit
r0 = 1
exit""", "value -2147483648 makes map_value pointer be out of bounds", err=errno.EINVAL),
    _c("map_key_scalar", "r2 = 0\nr1 = MAP(hash)\ncall 1\nr0 = 0\nexit",
       "R2 type=scalar expected=fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, "
       "trusted_ptr_"),
    _c("map_arg_scalar", "r2 = r10\nr2 += -8\nr1 = 0\ncall 1\nr0 = 0\nexit",
       "R1 type=scalar expected=map_ptr"),
    _c("map_key_uninit_stack", "r2 = r10\nr2 += -8\nr1 = MAP(hash)\ncall 1\nr0 = 0\nexit", None),
    _c("map_key_stack_oob", "r2 = r10\nr2 += -2\nr1 = MAP(hash)\ncall 1\nr0 = 0\nexit",
       "invalid read from stack R2 off=-2 size=4", err=errno.EINVAL),
    _c("map_update_value_short", """
r2 = r10
r2 += -8
r3 = r10
r3 += -4
r4 = 0
r1 = MAP(hash)
call 2
r0 = 0
exit""", "invalid read from stack R3 off=-4 size=8", err=errno.EINVAL),
    _c("map_ptr_arith", "r1 = MAP(hash)\nr1 += 8\nr0 = 0\nexit",
       "R1 pointer arithmetic on map_ptr prohibited"),
    _c("redirect_map_hash", "r1 = MAP(hash)\nr2 = 0\nr3 = 0\ncall 51\nexit",
       "cannot pass map_type 1 into func bpf_redirect_map#51", err=errno.EINVAL),
    _c("redirect_map_dev", "r1 = MAP(dev)\nr2 = 0\nr3 = 0\ncall 51\nexit", None),
    _c("redirect_map_cpu", "r1 = MAP(cpus)\nr2 = 0\nr3 = 2\ncall 51\nexit", None),
    _c("lookup_cpumap", _LOOKUP.format(m="cpus") + "r0 = 0\nexit",
       "cannot pass map_type 16 into func bpf_map_lookup_elem#1", err=errno.EINVAL),
    _c("lookup_devmap", _LOOKUP.format(m="dev") + "r0 = 0\nexit", None),
    # A packet pointer marked beyond (or at) data_end by a comparison takes the range a
    # later check of a copy gives (find_good_pkt_pointers keeps the larger range, and
    # -2/-1 are below any): gamemann's xdp-playground checksum loop reads it.
    _c("pkt_beyond_end_then_checked", _PKT_END_AGAIN.format(cmp=">", n=1, sz="u8"), None,
       processed=15),
    _c("pkt_at_end_then_checked", _PKT_END_AGAIN.format(cmp=">=", n=2, sz="u16"), None,
       processed=15),
    _c("tail_call", "r2 = MAP(progs)\nr3 = 0\ncall 12\nr0 = 2\nexit", None),
    # A constant tail call index within the prog array is precise (record_func_key): the
    # second path's "r3 = 0" meets the first's "r3 = 1" at t and is walked on (44), where
    # equal indexes, or indexes past max_entries (not recorded), prune there (41).
    _c("tail_call_key_precise", _TKEY.format(k1=1, k0=0), None, processed=44),
    _c("tail_call_key_equal", _TKEY.format(k1=1, k0=1), None, processed=41),
    _c("tail_call_key_past_end", _TKEY.format(k1=100, k0=101), None, processed=41),
    _c("tail_call_wrong_map", "r2 = MAP(hash)\nr3 = 0\ncall 12\nr0 = 2\nexit",
       "expected prog array map for tail callprocessed 3 insns (limit 1000000) "
       "max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0", err=errno.EINVAL),
    # -- pointer == pointer: one known non-NULL (reg_not_null) makes the other non-NULL where
    # they are equal; only that register, 64-bit JEQ/JNE only
    _c("ptr_eq_jne_not_null", _TWO + "if r6 != r7 goto out\nr0 = *(u32 *)(r7 +0)\n" + _OUT, None),
    _c("ptr_eq_jeq_not_null", _TWO + """
if r7 == r6 goto use
r0 = 0
exit
use:
r0 = *(u32 *)(r7 +0)
""" + _OUT, None),
    _c("ptr_eq_jne_taken_null", _TWO + """
if r6 != r7 goto use
r0 = 0
exit
use:
r0 = *(u32 *)(r7 +0)
""" + _OUT, _R7_NULL),
    _c("ptr_eq_jeq_fall_null", _TWO + "if r6 == r7 goto out\nr0 = *(u32 *)(r7 +0)\n" + _OUT,
       _R7_NULL),
    _c("ptr_eq_copy_stays_null", _TWO + """
r8 = r7
if r6 != r7 goto out
r0 = *(u32 *)(r8 +0)
""" + _OUT, "R8 invalid mem access 'map_value_or_null'"),
    # a NULL check on one path makes the spilled copy of the pointer non-NULL on that path
    # only (the state queued at the branch shares the spill until one side changes it)
    _c("spill_null_check_one_path", _LOOKUP.format(m="hash") + """
*(u64 *)(r10 -16) = r0
r7 = r0
call 7
if r0 == 0 goto other
if r7 == 0 goto out
r1 = *(u64 *)(r10 -16)
r0 = *(u32 *)(r1 +0)
goto out
other:
r1 = *(u64 *)(r10 -16)
r0 = *(u32 *)(r1 +0)
""" + _OUT, "R1 invalid mem access 'map_value_or_null'"),
    _c("ptr_eq_both_maybe_null", _TWO.replace("if r6 == 0 goto out\n", "") +
       "if r6 != r7 goto out\nr0 = *(u32 *)(r7 +0)\n" + _OUT, _R7_NULL),
    _c("ptr_eq_stack_no_inference", _TWO + """
r6 = r10
if r6 != r7 goto out
r0 = *(u32 *)(r7 +0)
""" + _OUT, _R7_NULL),
    _c("ptr_eq_ctx_no_inference", "r8 = r1\n" + _TWO + """
if r8 != r7 goto out
r0 = *(u32 *)(r7 +0)
""" + _OUT, _R7_NULL),
    _c("ptr_eq_map_ptr", _TWO + """
r6 = MAP(hash)
if r6 != r7 goto out
r0 = *(u32 *)(r7 +0)
""" + _OUT, None),
    _c("ptr_eq_wide_offset_no_inference", "r8 = r1\n" + _TWO + """
r5 = *(u32 *)(r8 +12)
r6 += r5
if r6 != r7 goto out
r0 = *(u32 *)(r7 +0)
""" + _OUT, _R7_NULL),
    _c("ptr_eq_jmp32_no_inference", _TWO + "if w6 != w7 goto out\nr0 = *(u32 *)(r7 +0)\n" + _OUT,
       _R7_NULL),
    _c("ptr_eq_jgt_no_inference", _TWO + """
if r6 > r7 goto out
if r6 < r7 goto out
r0 = *(u32 *)(r7 +0)
""" + _OUT, _R7_NULL),
    _c("ptr_eq_ringbuf", _LOOKUP.format(m="hash") + """
if r0 == 0 goto out
r6 = r0
r1 = MAP(rb)
r2 = 8
r3 = 0
call 131
r7 = r0
if r6 != r7 goto other
r1 = 5
*(u64 *)(r7 +0) = r1
r1 = r7
r2 = 0
call 132
goto out
other:
if r7 == 0 goto out
r1 = r7
r2 = 0
call 132
""" + _OUT, None),
    # PTR_TO_BTF_ID on either side: no inference (such a pointer may be NULL unflagged)
    _c("ptr_eq_btf_id_maybe_null", """
r8 = r1
r1 = 0
*(u32 *)(r10 -48) = r1
r2 = r10
r2 += -48
r1 = MAP(arr)
call 1
r6 = r0
r1 = r8
""" + _CT_LOOKUP + """
r7 = r0
if r6 != r7 goto other
r1 = r7
call KFUNC(bpf_ct_release)
r0 = 2
exit
other:
if r7 == 0 goto out
r1 = r7
call KFUNC(bpf_ct_release)
""" + _OUT, "Possibly NULL pointer passed to trusted arg0"),
    _c("ptr_eq_btf_id_not_null_side", _CT_LOOKUP + """
if r0 == 0 goto out
r6 = r0
r1 = 0
*(u32 *)(r10 -48) = r1
r2 = r10
r2 += -48
r1 = MAP(hash)
call 1
r7 = r0
if r6 != r7 goto rel
r0 = *(u32 *)(r7 +0)
rel:
r1 = r6
call KFUNC(bpf_ct_release)
""" + _OUT, _R7_NULL),
    # is_branch_taken: a map pointer, a ringbuf record and a map value are never NULL, but
    # one with an offset that may reach 2^29 might be; the dead branch is not walked
    _c("not_null_map_ptr", "r1 = MAP(hash)\nif r1 == 0 goto +2\nr0 = 0\nexit\n"
       "r0 = *(u64 *)(r10 +8)\nexit", None),
    _c("not_null_ringbuf", """
r1 = MAP(rb)
r2 = 8
r3 = 0
call 131
if r0 == 0 goto out
r6 = r0
if r6 != 0 goto sub
r0 = *(u64 *)(r10 +8)
sub:
r1 = r6
r2 = 0
call 132
""" + _OUT, None),
    _c("not_null_map_value_small_offset", "r6 = r1\n" + _LOOKUP.format(m="hash") + """
if r0 == 0 goto out
r5 = *(u32 *)(r6 +12)
r5 &= 0xffff
r0 += r5
if r0 != 0 goto out
r0 = *(u64 *)(r10 +8)
""" + _OUT, None),
    _c("not_null_map_value_wide_offset", "r6 = r1\n" + _LOOKUP.format(m="hash") + """
if r0 == 0 goto out
r5 = *(u32 *)(r6 +12)
r0 += r5
if r0 != 0 goto out
r0 = *(u64 *)(r10 +8)
""" + _OUT, "invalid read from stack R10 off=8 size=8"),
    # -- helpers -----------------------------------------------------------------------------
    _c("helper_not_xdp", "call 4\nexit", "program of this type cannot use helper "
       "bpf_probe_read#4", err=errno.EINVAL),
    _c("helper_unknown", "call 999\nexit", "invalid func unknown#999", err=errno.EINVAL),
    _c("helper_pid_tgid", "call 14\nr0 &= 3\nexit", None),  # bpf_get_current_pid_tgid
    _c("helper_arg_uninit", "r1 = 1\ncall 23\nexit", "R2 !read_ok"),
    _c("helper_ctx_arg", "r1 = 0\nr2 = 0\ncall 44\nexit", "R1 type=scalar expected=ctx"),
    _c("helper_clobbers", "r1 = 1\nr2 = 0\ncall 23\nr0 = r1\nexit", "R1 !read_ok"),
    _c("load_bytes_zero", "r2 = 0\nr3 = r10\nr3 += -8\nr4 = 0\ncall 189\nexit",
       "R4 invalid zero-sized read: u64=[0,0]"),
    _c("load_bytes_overflow", "r2 = 0\nr3 = r10\nr3 += -8\nr4 = 16\ncall 189\nexit",
       "invalid write to stack R3 off=-8 size=16", err=errno.EINVAL),
    _c("load_bytes_ok", "r2 = 0\nr3 = r10\nr3 += -16\nr4 = 16\ncall 189\nr0 = 2\nexit", None),
    _c("load_bytes_unbounded", """
r4 = *(u32 *)(r1 +12)
r2 = 0
r3 = r10
r3 += -16
call 189
exit""", "R4 invalid zero-sized read: u64=[0,4294967295]"),
    _c("printk_gpl", "r1 = r10\nr1 += -8\nr2 = 0\n*(u64 *)(r10 -8) = r2\nr2 = 8\ncall 6\nexit",
       "cannot call GPL-restricted function from non-GPL compatible program",
       license="Proprietary", err=errno.EINVAL),
    _c("printk_ok", "r1 = r10\nr1 += -8\nr2 = 0\n*(u64 *)(r10 -8) = r2\nr2 = 8\ncall 6\nexit",
       None),
    # -- ringbuf -----------------------------------------------------------------------------
    _c("ringbuf_leak", "r1 = MAP(rb)\nr2 = 8\nr3 = 0\ncall 131\nr0 = 0\nexit",
       "BPF_EXIT instruction in main prog would lead to reference leak", err=errno.EINVAL),
    _c("ringbuf_ok", """
r1 = MAP(rb)
r2 = 8
r3 = 0
call 131
if r0 == 0 goto +5
r1 = 7
*(u64 *)(r0 +0) = r1
r1 = r0
r2 = 0
call 132
r0 = 2
exit""", None),
    _c("ringbuf_oob", """
r1 = MAP(rb)
r2 = 8
r3 = 0
call 131
if r0 == 0 goto +5
r1 = 7
*(u64 *)(r0 +8) = r1
r1 = r0
r2 = 0
call 132
r0 = 2
exit""", "R0 min value is outside of the allowed memory range"),
    _c("ringbuf_var_size", """
r2 = *(u32 *)(r1 +12)
r1 = MAP(rb)
r3 = 0
call 131
r0 = 0
exit""", "R2 is not a known constant'"),
    _c("ringbuf_unchecked", """
r1 = MAP(rb)
r2 = 8
r3 = 0
call 131
r1 = 7
*(u64 *)(r0 +0) = r1
r0 = 0
exit""", "R0 invalid mem access 'ringbuf_mem_or_null'"),
    # -- atomics -----------------------------------------------------------------------------
    _c("atomic_stack", """
r2 = 0
*(u64 *)(r10 -8) = r2
r2 = 1
lock *(u64 *)(r10 -8) += r2
r0 = *(u64 *)(r10 -8)
exit""", None),
    _c("atomic_pkt", _PKT + """
r4 = r2
r4 += 8
if r4 > r3 goto +2
r5 = 1
lock *(u64 *)(r2 +0) += r5
r0 = 1
exit""", "BPF_ATOMIC stores into R2 pkt is not allowed"),
    # -- load-acquire and store-release (Linux 6.15): check_atomic_load checks the pointer
    # kind before the access, check_atomic_store after it; alignment is strict for both
    _c("acq_stack_u8", "r1 = 0x12\n*(u8 *)(r10 -1) = r1\nw2 = load_acquire((u8 *)(r10 -1))\n"
       "r0 = 0\nif r2 > 0xff goto +1\nexit\nr0 = *(u8 *)(r2 +0)\nexit", None),
    _c("acq_fill_ptr", "*(u64 *)(r10 -8) = r1\nr2 = load_acquire((u64 *)(r10 -8))\n"
       "r0 = *(u32 *)(r2 +0)\nexit", None),
    _c("acq_map_u16", _ARR0 + "if r0 == 0 goto +2\nr0 = load_acquire((u16 *)(r0 +2))\n"
       "exit\nr0 = 0\nexit", None),
    _c("acq_map_ptr", "r2 = MAP(arr)\nr0 = load_acquire((u64 *)(r2 +0))\nexit", None),
    _c("rel_stack_u8", "r1 = 0x12\nstore_release((u8 *)(r10 -1), w1)\n"
       "r0 = *(u8 *)(r10 -1)\nexit", None),
    _c("rel_spill_ptr", "store_release((u64 *)(r10 -8), r1)\nr2 = *(u64 *)(r10 -8)\n"
       "r0 = *(u32 *)(r2 +0)\nexit", None),
    _c("acq_uninit_src", "r0 = load_acquire((u64 *)(r2 +0))\nexit", "R2 !read_ok"),
    _c("acq_ctx", "r0 = load_acquire((u32 *)(r1 +12))\nexit",
       "BPF_ATOMIC loads from R1 ctx is not allowed"),
    _c("acq_ctx_bad_off", "r10 = load_acquire((u32 *)(r1 +2))\nr0 = 0\nexit",
       "BPF_ATOMIC loads from R1 ctx is not allowed"),
    _c("acq_pkt_oob", _PKT + "r0 = load_acquire((u8 *)(r2 +0))\nexit",
       "BPF_ATOMIC loads from R2 pkt is not allowed"),
    _c("acq_pkt_meta", "r2 = *(u32 *)(r1 +8)\nr0 = load_acquire((u8 *)(r2 +0))\nexit",
       "BPF_ATOMIC loads from R2 pkt_meta is not allowed"),
    _c("acq_pkt_end", "r2 = *(u32 *)(r1 +4)\nr0 = load_acquire((u8 *)(r2 +0))\nexit",
       "R2 invalid mem access 'pkt_end'"),
    _c("acq_scalar", "r2 = 0\nr0 = load_acquire((u64 *)(r2 +0))\nexit",
       "R2 invalid mem access 'scalar'"),
    _c("acq_fp_dst", "r1 = 0\n*(u64 *)(r10 -8) = r1\nr10 = load_acquire((u64 *)(r10 -8))\n"
       "r0 = 0\nexit", "frame pointer is read only"),
    _c("acq_misaligned", "r1 = 0\n*(u64 *)(r10 -8) = r1\nw0 = load_acquire((u32 *)(r10 -6))\n"
       "exit", "misaligned stack access off 0+0+-6 size 4"),
    _c("acq_map_mis", _ARR0 + "if r0 == 0 goto +2\nr0 = load_acquire((u16 *)(r0 +3))\n"
       "exit\nr0 = 0\nexit", "misaligned value access off 0+0+3 size 2"),
    _c("acq_map_oob", _ARR0 + "if r0 == 0 goto +2\nr0 = load_acquire((u64 *)(r0 +16))\n"
       "exit\nr0 = 0\nexit", "R0 min value is outside of the allowed memory range"),
    _c("rel_uninit_src", "store_release((u64 *)(r10 -8), r2)\nr0 = 0\nexit", "R2 !read_ok"),
    _c("rel_ctx", "r2 = 0\nstore_release((u32 *)(r1 +12), w2)\nr0 = 0\nexit",
       "invalid bpf_context access off=12 size=4"),
    _c("rel_pkt", _PKT + "r4 = r2\nr4 += 8\nif r4 > r3 goto +2\nr5 = 1\n"
       "store_release((u32 *)(r2 +2), w5)\nr0 = 1\nexit",
       "BPF_ATOMIC stores into R2 pkt is not allowed"),
    _c("rel_pkt_mis", _PKT + "r4 = r2\nr4 += 8\nif r4 > r3 goto +2\nr5 = 1\n"
       "store_release((u64 *)(r2 +0), r5)\nr0 = 1\nexit",
       "misaligned packet access off 2+0+0+0 size 8"),
    _c("rel_pkt_oob", _PKT + "r5 = 1\nstore_release((u32 *)(r2 +2), w5)\nr0 = 1\nexit",
       "R2 offset is outside of the packet"),
    _c("rel_misaligned", "r1 = 0\nstore_release((u64 *)(r10 -12), r1)\nr0 = 0\nexit",
       "misaligned stack access off 0+0+-12 size 8"),
    _c("rel_rodata", "r1 = MAP(rodata)\nr2 = 1\nstore_release((u8 *)(r1 +0), w2)\nr0 = 0\n"
       "exit", "write into map forbidden, value_size=64 off=0 size=1"),
    _c("acq_sock", _SK_TUPLE + "call 84\nif r0 == 0 goto out\nr6 = r0\n"
       "r2 = load_acquire((u32 *)(r6 +0))\nr1 = r6\ncall 86\n" + _OUT,
       "BPF_ATOMIC loads from R6 sock is not allowed"),
    _c("acq_sock_null", _SK_TUPLE + "call 84\nr6 = r0\nr2 = load_acquire((u32 *)(r6 +0))\n"
       "if r6 == 0 goto out\nr1 = r6\ncall 86\n" + _OUT,
       "R6 invalid mem access 'sock_or_null'"),
    _c("rel_sock", _SK_TUPLE + "call 84\nif r0 == 0 goto out\nr6 = r0\nr2 = 0\n"
       "store_release((u32 *)(r6 +0), w2)\nr1 = r6\ncall 86\n" + _OUT,
       "R6 cannot write into sock"),
    _c("rel_sock_mis", _SK_TUPLE + "call 84\nif r0 == 0 goto out\nr6 = r0\nr2 = 0\n"
       "store_release((u32 *)(r6 +2), w2)\nr1 = r6\ncall 86\n" + _OUT,
       "misaligned sock access off 0+0+2 size 4"),
    # precision (r8 + fp needs r8 precise) flows back through a store-release spill or a
    # load-acquire fill to the constant in r7, not to r6 and r9: the jump's two paths
    # prune at the join
    _c("rel_spill_prec", _PREC_SPILL.format(st="store_release((u64 *)(r10 -8), r7)",
                                            ld="r8 = *(u64 *)(r10 -8)"), None, processed=15),
    _c("acq_fill_prec", _PREC_SPILL.format(st="*(u64 *)(r10 -8) = r7",
                                           ld="r8 = load_acquire((u64 *)(r10 -8))"), None,
       processed=15),
    _c("rmw_u8", "r2 = 0\n*(u64 *)(r10 -8) = r2\nlock *(u8 *)(r10 -8) += r2\nr0 = 0\nexit",
       "invalid atomic operand size", err=errno.EINVAL),
    # -- precision: a state pruned against a safe one only where the values that made
    # it safe are equal. The safe path (r6 = 0) runs first and leaves a kept state at the
    # join; the other one (r6 = 64) must not be pruned against it.
    _c("prec_ptr_add", _PREC.format(use="""
r2 = r10
r2 += -8
r2 += r6
r1 = 0
*(u64 *)(r2 +0) = r1"""), "invalid write to stack R2 off=56 size=8"),
    _c("prec_spill_fill", _PREC.format(use="""
*(u64 *)(r10 -16) = r6
r7 = 1
r7 = 2
r7 = *(u64 *)(r10 -16)
r2 = r10
r2 += -8
r2 += r7
r1 = 0
*(u64 *)(r2 +0) = r1"""), "invalid write to stack R2 off=56 size=8"),
    _c("prec_helper_size", _PREC.format(use="""
r4 = r6
r4 += 8
r1 = r9
r2 = 0
r3 = r10
r3 += -8
call 189"""), "invalid write to stack R3 off=-8 size=72", err=errno.EINVAL),
    _c("prec_linked_bound", _PREC.format(use="""
r7 = r6
if r6 > 32 goto +1
r7 = 0
r2 = r10
r2 += -8
r2 += r7
r1 = 0
*(u64 *)(r2 +0) = r1"""), "invalid write to stack R2 off=56 size=8"),
    _c("prec_alu_chain", _PREC.format(use="""
r7 = r6
r7 <<= 1
r7 += 4
r2 = r10
r2 += -16
r2 += r7
r1 = 0
*(u32 *)(r2 +0) = r1"""), "invalid write to stack R2 off=116 size=4"),
    # the slot a later path reads differs at the join: it is compared (read marks)
    _c("live_stack_read", """r9 = r1
call 7
r6 = 64
*(u64 *)(r10 -16) = r6
if r0 > 10 goto +9
r6 = 0
*(u64 *)(r10 -16) = r6
r1 = 1
r1 = 2
r1 = 3
r1 = 4
r1 = 5
r1 = 6
r1 = 8
r1 = 7
r7 = *(u64 *)(r10 -16)
r2 = r10
r2 += -8
r2 += r7
r1 = 0
*(u64 *)(r2 +0) = r1
r0 = 2
exit""", "invalid write to stack R2 off=56 size=8"),
    # 2^24 paths, each leaving a different r8: only pruning on imprecise scalars (r8 never
    # decides anything) keeps this under the 1M-instruction limit.
    _c("prec_imprecise_prunes", "r8 = 0\n" + """call 7
r6 = 0
if r0 > 10 goto +1
r6 = 1
r8 <<= 1
r8 += r6
""" * 24 + "r0 = r8\nr0 &= 3\nexit", None),
    # get_constant_map_key: a key of zero bytes (fp-4) is known without a precision mark;
    # the scalar spilled beside it in the same slot (fp-8) stays imprecise, so the third
    # path (fp-8 in [4, 7]) is pruned at the join against the first ([0, 1]); Linux walks
    # 24 insns
    _c("prec_zero_key_beside_spill", """*(u32 *)(r10 -4) = 0
call 7
r0 &= 7
*(u32 *)(r10 -8) = r0
if r0 > 3 goto +10
if r0 > 1 goto +9
r6 = 1
r6 += 1
r6 += 1
r6 += 1
r6 += 1
r6 += 1
r6 += 1
r6 += 1
r6 = 0
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
if r0 == 0 goto +1
r0 = 2
exit""", None, processed=24),
    # -- which states a prune point sees and compares (the walks pinned are Linux's)
    # func_states_equal: a caller's registers are compared where live at its call; r7 (a
    # stack pointer on one path into sub, a scalar on the other) is dead there, so the
    # second path is pruned inside sub.
    _c("prune_caller_dead_reg", "call 7\nr6 = r0\n" + "r8 = 0\n" * 3 +
       "r7 = r10\nif r6 > 5 goto l1\nr7 = 0\nl1:\n*(u64 *)(r10 -8) = r7\ncall sub\nr0 = 2\n"
       "exit\nsub:\ncall 7\nr1 = r0\nr2 = 0\nr3 = 0\nr4 = 0\nif r1 > 9 goto s1\nr2 = 1\n"
       "s1:\nr3 = 1\nr4 = 1\nif r1 > 20 goto s2\nr0 = 1\ns2:\nr0 = 2\nexit", None,
       processed=48),
    # scalar_reg_for_stack: for root an uninitialised slot the path allocated (it wrote
    # fp-16) reads as an unbounded scalar, which the imprecise spill at fp-8 accepts
    _c("prune_uninit_slot_vs_spill", "call 7\nr6 = r0\n" + "r8 = 0\n" * 6 +
       "if r6 > 5 goto l1\nr1 = 7\n*(u64 *)(r10 -8) = r1\ngoto l2\nl1:\nr1 = 3\n"
       "*(u64 *)(r10 -16) = r1\nl2:\nr2 = *(u64 *)(r10 -8)\nr3 = 0\nif r6 > 3 goto l3\n"
       "r3 = 1\nl3:\nr0 = 2\nexit", None, processed=23),
    # is_state_visited: more than 40 jmp_history entries (here spills) since the last
    # checkpoint force one at the next prune point, the jump at q though no jump ran since
    # p; the second path, pruned at p by no state (r7 differs), is pruned there.
    _c("prune_long_history_checkpoint", "r9 = r1\ncall 7\nr6 = r0\n" + "r8 = 0\n" * 3 +
       "r7 = r9\nif r6 > 5 goto a\nr7 = 0\ngoto p\na:\nr8 = 0\np:\n*(u64 *)(r10 -8) = r7\n" +
       "*(u64 *)(r10 -16) = r6\n" * 41 + "*(u64 *)(r10 -8) = r6\nif r6 > 3 goto q\nr0 = 1\n"
       "exit\nq:\nr0 = 2\nexit", None, processed=103),
    # explored_state: the states of a pc are listed by a hash of it and the callsite, so
    # at sub's second call the first call's states (still on the path) are not seen and
    # do not hold the new ones back; the second path into it is pruned at its entry.
    _c("prune_second_call_own_states", "r9 = r10\ncall 7\nr6 = r0\n" + "r8 = 0\n" * 6 +
       "r1 = r6\ncall sub\nr7 = r9\nif r6 > 5 goto m1\nr7 = 0\nm1:\n*(u64 *)(r10 -8) = r7\n"
       "r1 = r6\ncall sub\nr0 = 2\nexit\nsub:\ncall 7\nr1 = r0\n" + "r2 = 0\n" * 4 +
       "if r1 > 5 goto s1\nr3 = 1\ns1:\nr0 = 1\nr2 = 0\nif r1 > 7 goto s2\nr0 = 2\ns2:\n"
       "exit", None, processed=90),
    # backtrack_insn: the precision walk from r5 += r4 reaches r4 -= r2 (two packet
    # pointers) and then a store through r2: it gives up and every scalar becomes precise
    # (r7 too), so the branch with r7 = 0 is not pruned at the join.
    _c("prec_pointer_sub_gives_up", """
r6 = r1
r8 = 0
r9 = 0
call 7
r7 = 0
if r0 > 10 goto +8
r7 = 1
if r8 != 0 goto +0
if r9 != 0 goto +0
r1 = 0
r1 = 0
r1 = 0
r1 = 0
r1 = 0
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r4 = r2
r4 += 8
if r4 > r3 goto +7
*(u8 *)(r2 +0) = r7
r4 -= r2
r4 &= 7
r5 = r2
r5 += r4
r0 = 2
exit
r0 = 1
exit""", None, processed=41),
    # propagate_precision hands on only what a finished state holds once cleaned: the
    # first path's fallback makes every scalar precise, r9 too, though dead at pc 15; the
    # second path pruned there leaves r9 imprecise at pc 11, where the third is pruned.
    _c("prec_propagate_cleaned", """
r6 = r1
goto +0
goto +0
call 7
r7 = r0
call 7
r9 = 0
if r0 > 10 goto +1
r9 = 1
if r7 > 10 goto +1
r9 += 2
*(u64 *)(r10 -8) = r9
call 7
goto +0
goto +0
r1 = 0
r1 = 0
r1 = 0
r1 = 0
goto +0
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r4 = r2
r4 += 8
if r4 > r3 goto +6
*(u8 *)(r2 +0) = 0
r4 -= r2
r4 &= 7
r5 = r2
r5 += r4
r0 = 2
exit""", None, processed=46),
    # scrub_spilled_slot: a write at fp-4 into the slot of a 2-byte spill at fp-8 makes
    # every byte of the slot misc, the zero byte at fp-6 too: the byte read back is
    # unknown and the load through the scalar in r1 is reached.
    _c("stack_write_scrubs_narrow_spill", "r1 = 0\n*(u8 *)(r10 -6) = r1\nr1 = 15\n"
       "*(u16 *)(r10 -8) = r1\nr1 = 7\n*(u32 *)(r10 -4) = r1\nr0 = *(u8 *)(r10 -6)\n"
       "if r0 == 0 goto +2\n" + _DEREF_SCALAR, "R1 invalid mem access 'scalar'"),
    # scalar_byte_swap: a byte swap moves the tnum's known bits with their bytes (bounds
    # follow from it), so the compares after it are decided and the load of the
    # scalar in r1 is never reached; le16/le32 truncate, le64 keeps the value.
    _c("bswap_be32_known_bits", "call 7\nw0 &= -49\nr0 = be32 r0\nw0 &= 536870912\n"
       "if w0 == 0 goto +2\n" + _DEREF_SCALAR, None, processed=7),
    _c("bswap_be16_known_bits", "call 7\nr0 &= 0xff00\nr0 = be16 r0\nif r0 <= 255 goto +2\n"
       + _DEREF_SCALAR, None, processed=6),
    _c("bswap_le16_truncates", "call 7\nr0 &= 0xff\nr0 = le16 r0\nif r0 <= 255 goto +2\n"
       + _DEREF_SCALAR, None, processed=6),
    _c("bswap_le64_keeps", "call 7\nr0 &= 0xff\nr0 = le64 r0\nif r0 <= 255 goto +2\n"
       + _DEREF_SCALAR, None, processed=6),
    _c("bswap_be64_known_bits", "call 7\nr0 &= 0xff\nr0 = be64 r0\n"
       "r1 = 0xff00000000000000 ll\nif r0 <= r1 goto +2\n" + _DEREF_SCALAR, None,
       processed=7),
    _c("bswap64_known_bits", "call 7\nr0 &= 0xff\nr0 = bswap64 r0\n"
       "r1 = 0xff00000000000000 ll\nif r0 <= r1 goto +2\n" + _DEREF_SCALAR, None,
       processed=7),
    _c("bswap_be32_clears_high", "call 7\nr0 = be32 r0\nr1 = 0xffffffff ll\n"
       "if r0 <= r1 goto +2\n" + _DEREF_SCALAR, None, processed=6),
    # maybe_fork_scalars: a scalar that is -1 or 0 (an arithmetic shift of the sign bit)
    # masked with a constant is walked as each value (the instruction again with 0), so
    # the compares after it are decided and the division by zero is never reached; a
    # 64-bit mask of a register whose subregister is -1 or 0 forks the subregister
    *(_c(name, "call 7\n" + body + "r0 /= 0\nr0 = 0\nexit", None, processed=12)
      for name, body in (
          ("fork_scalars_and32", "w2 = w0\nw2 s>>= 31\nw2 &= -134\nif w2 s> -1 goto +2\n"
           "if w2 != -136 goto +1\n"),
          ("fork_scalars_or64", "r2 = r0\nr2 <<= 32\nr2 s>>= 63\nr2 |= 134\n"
           "if r2 s> -1 goto +2\nif r2 == -1 goto +1\n"),
          ("fork_scalars_subreg", "w2 = w0\nw2 s>>= 31\nr2 &= 6\nif r2 == 6 goto +2\n"
           "if r2 == 0 goto +1\n"))),
    # tnum_mul (Linux 6.17+) multiplies bit by bit, an unknown bit of the multiplier
    # taking the union of adding and not: (x & 2 | 1) * 3 is 3 or 9, whose bit 2 is a
    # known 0, so the compare is decided
    _c("tnum_mul_union", "call 7\nr0 &= 2\nr0 |= 1\nr0 *= 3\nr0 &= 4\nif r0 == 0 goto +2\n"
       + _DEREF_SCALAR, None, processed=8),
    # A bounded loop (no iterator, may_goto or callback in it) whose body turns compares
    # of unknown scalars into 0/1 words it accumulates: its finished states prune the
    # other branches' imprecise words (NOT_EXACT) as outside a loop; comparing every
    # range there (RANGE_WITHIN) would walk 8 paths per iteration, 8^16 in all.
    _c("loop_bounded_imprecise", """
call 7
r8 = r0
call 7
r9 = r0
r6 = 0
r7 = 0
loop:
w1 = 1
if r8 s< r9 goto +1
w1 = 0
w2 = 1
if r8 < r9 goto +1
w2 = 0
w3 = 1
if r8 == r9 goto +1
w3 = 0
r2 <<= 1
r1 |= r2
r3 <<= 2
r1 |= r3
r6 *= 31
r6 += r1
r7 += 1
if r7 < 16 goto loop
r0 = r6
r0 &= 3
exit""", None, processed=1555),
    # -- scalars linked with an offset (BPF_ADD_CONST) ------------------------------------
    # r1 = r0; r1 += c (or -=, 64- or 32-bit) keeps r1 linked to r0 with offset c: a
    # compare of r0 bounds r1 too (sync_linked_regs), so the load through a scalar is never
    # reached; a second add, a 32-bit add to a 64-bit value and a compare linking a 32-bit
    # to a 64-bit offset end the link.
    *(_c(name, _LINKED_OFF.format(pre=pre, op=o, lim=lim), linux, processed=n)
      for name, pre, o, lim, linux, n in (
          ("linked_add64", "r0 &= 0xff", "r1 += 1", 11, None, 12),
          ("linked_sub64", "r0 &= 0xff", "r1 -= 1", 9, None, 12),
          ("linked_add64_neg", "w0 = w0", "r1 += -1", 9, None, 12),
          ("linked_add32", "w0 = w0", "w1 += 1", 11, None, 12),
          ("linked_sub32", "r0 &= 0xff", "w1 -= 1", 9, None, 12),
          ("linked_mov32_add", "r0 &= 0xff", "w1 = w1\nr1 += 1", 11, None, 15),
          ("linked_add_twice", "r0 &= 0xff", "r1 += 1\nr1 += 1", 12, _SCALAR_MEM, 0),
          ("linked_add32_u64", "", "w1 += 1", 11, _SCALAR_MEM, 0))),
    # r2 (64-bit offset) compared: r1 (32-bit offset) is not bounded by it
    _c("linked_mixed_width", """
call 7
r0 &= 0xff
r1 = r0
w1 += 1
r2 = r0
r2 += 2
if r2 > 12 goto +5
if r1 > 11 goto +1
goto +2
r1 = 0
r0 = *(u64 *)(r1 +0)
r0 = 2
exit""", _SCALAR_MEM),
    # the 32-bit offset wraps: r0 == 0xffffffff makes w1 = w0 + 1 zero
    _c("linked_add32_wraps", """
call 7
w0 = w0
r1 = r0
w1 += 1
r2 = 0xffffffff ll
if r0 != r2 goto +4
if r1 == 0 goto +3
r1 = 0
r0 = *(u64 *)(r1 +0)
r0 = 2
exit""", None, processed=9),
    # -- callbacks ---------------------------------------------------------------------------
    # Callbacks need BTF func_info (the loader objects have it): asm programs are refused.
    _c("loop_without_btf", _LOOP.format(cb="r0 = 0"), "missing btf func_info", err=errno.EINVAL),
    # check_max_stack_depth: a callback whose address a function takes counts as called
    # there, its stack on top of the caller's
    _c("loop_cb_stack_combined", "r1 = 0\n*(u64 *)(r10 -16) = r1\n" + _LOOP.format(
        cb="r1 = 0\n*(u64 *)(r10 -512) = r1\nr0 = 0"),
       "combined stack size of 2 calls is 528. Too large", funcs=_CB),
    _c("loop_not_func", "r1 = 4\nr2 = 0\nr3 = 0\nr4 = 0\ncall 181\nexit",
       "R2 type=scalar expected=func"),
    # A counter in the caller's stack, advanced by 1 or 2 per call and used as an offset
    # (precise: the calls never converge, bpf_loop's 6 are all walked). A state of a later
    # call, further from the end of the loop (more callbacks begun, callback_depth), never
    # covers one of an earlier call (func_states_equal), nor does a finished state kept at
    # the call prune before a newer one there is compared (the states kept at a forced
    # checkpoint, newest first; one still on the path dropped after 64 misses per hit).
    _c("loop_cb_depth", """
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = 6
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 181
r0 = 2
exit
cb:
r6 = *(u64 *)(r2 +0)
r6 &= 7
r8 = r2
call 7
if r0 > 10 goto +2
r6 += 1
goto +1
r6 += 2
r1 = 1
r1 = 2
r1 = 3
r1 = 4
r1 = 5
r1 = 6
r1 = 7
r1 = 8
*(u64 *)(r8 +0) = r6
r7 = r10
r7 += -64
r7 += r6
r0 = *(u8 *)(r7 +0)
r0 = 0
exit""", None, funcs=_CB, processed=2128),
    # A caller's slot holds a misc byte (and invalid ones) until the callback spills a
    # bounded scalar there: at the call the states of a callback's loop are compared for
    # convergence (RANGE_WITHIN), which in 6.18 wants each stack byte of the same kind, so
    # the first return is no match for the state before the loop and the callback is
    # walked a second time. A slot the caller never wrote (no stack there yet) is no bar.
    _c("loop_cb_misc_then_spill", """
r1 = 7
*(u8 *)(r10 -7) = r1
r1 = 4
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 181
r0 = *(u32 *)(r10 -8)
r0 = 2
exit
cb:
r1 = 5
*(u32 *)(r2 +0) = r1
r0 = 0
exit""", None, funcs=_CB, processed=24),
    _c("loop_cb_uninit_then_spill", """
r1 = 4
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 181
r0 = *(u32 *)(r10 -8)
r0 = 2
exit
cb:
r1 = 5
*(u32 *)(r2 +0) = r1
r0 = 0
exit""", None, funcs=_CB, processed=14),
    # At a callback's return a scalar that differs from the previous iteration's becomes
    # unknown unless precision tracking marked it (widen_imprecise_scalars), in the
    # frame it lives in: the caller's counter is widened and the calls converge, though
    # the callback's own fp-8 (same offset) holds a value a decided branch relied on.
    _c("loop_cb_widen_by_frame", """
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = 10
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 181
r0 = 2
exit
cb:
r3 = *(u64 *)(r2 +0)
r3 += 1
*(u64 *)(r2 +0) = r3
r4 = 4
*(u64 *)(r10 -8) = r4
r4 = *(u64 *)(r10 -8)
if r4 == 4 goto +1
r0 = 1
r0 = 0
exit""", None, funcs=_CB, processed=32),
    # bpf_loop relies on its count (R1) and, while the call can be inlined, on zero flags
    # (R4): both are marked precise, so a second path with another count or flags is not
    # pruned at the state kept where the two paths met.
    _c("loop_nr_precise", """
call 7
r6 = 2
if r0 == 0 goto +1
r6 = 3
r7 = 0
r7 = 1
r7 = 2
r7 = 3
r7 = 4
r7 = 5
r7 = 6
r7 = 7
r7 = 8
if r0 == 5 goto +1
r7 = 9
r1 = r6
r2 = subprog[cb]
r3 = 0
r4 = 0
call 181
r0 = 2
exit
cb:
r0 = 0
exit""", None, funcs=_CB, processed=51),
    _c("loop_flags_precise", """
call 7
r7 = 1
if r0 == 0 goto +1
r7 = 0
r6 = 0
r6 = 1
r6 = 2
r6 = 3
r6 = 4
r6 = 5
r6 = 6
r6 = 7
r6 = 8
if r0 == 5 goto +1
r6 = 9
r1 = 2
r2 = subprog[cb]
r3 = 0
r4 = r7
call 181
r0 = 2
exit
cb:
r0 = 0
exit""", None, funcs=_CB, processed=51),
    # -- bpf-to-bpf calls --------------------------------------------------------------------
    _c("call_ok", "call pc+2\nr0 = 2\nexit\nr0 = 1\nexit", None),
    _c("call_callee_reads_r6", "r6 = 1\ncall pc+2\nr0 = 2\nexit\nr0 = r6\nexit", "R6 !read_ok"),
    _c("call_caller_r1_clobbered", "r1 = 1\ncall pc+2\nr0 = r1\nexit\nr0 = 1\nexit",
       "R1 !read_ok"),
    # A void static function leaves R0 unwritten: Linux copies it to the caller unread
    # (prepare_func_exit); only a read in the caller, or the main exit, refuses it.
    _c("call_void_callee", "call pc+2\nr0 = 2\nexit\nr1 = 1\nexit", None),
    _c("call_void_callee_r0_used", "call pc+1\nexit\nr1 = 1\nexit", "R0 !read_ok"),
    _c("call_pass_stack", """
r1 = 5
*(u64 *)(r10 -8) = r1
r1 = r10
r1 += -8
call pc+1
exit
r0 = *(u64 *)(r1 +0)
exit""", None),
    _c("call_too_deep", "call pc+1\nexit\n" * 8 + "r0 = 0\nexit",
       "the call stack of 9 frames is too deep", err=errno.E2BIG),
    _c("call_stack_too_big", """
r1 = 0
*(u64 *)(r10 -512) = r1
call pc+2
r0 = 0
exit
r1 = 0
*(u64 *)(r10 -8) = r1
r0 = 0
exit""", "combined stack size of 2 calls is 528. Too large"),
    # -- kfuncs: XDP metadata (device-bound), dynptrs and slices, conntrack references --------
    _c("dynptr_ok", """
r6 = r1
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r0 = 2
exit""", None),
    _c("dynptr_slice", """
r6 = r1
r1 = r6
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
r2 = 0
r3 = 0
r4 = 14
call KFUNC(bpf_dynptr_slice)
if r0 == 0 goto +2
r0 = *(u16 *)(r0 +12)
exit
r0 = 1
exit""", None),
    _c("dynptr_slice_nullck", """
r6 = r1
r1 = r6
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
r2 = 0
r3 = 0
r4 = 14
call KFUNC(bpf_dynptr_slice)
r0 = *(u16 *)(r0 +12)
exit""", "R0 invalid mem access 'rdonly_mem_or_null'"),
    _c("dynptr_slice_oob", """
r6 = r1
r1 = r6
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
r2 = 0
r3 = 0
r4 = 14
call KFUNC(bpf_dynptr_slice)
if r0 == 0 goto +2
r0 = *(u16 *)(r0 +13)
exit
r0 = 1
exit""", 'R0 min value is outside of the allowed memory range'),
    _c("dynptr_slice_write", """
r6 = r1
r1 = r6
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
r2 = 0
r3 = 0
r4 = 14
call KFUNC(bpf_dynptr_slice)
if r0 == 0 goto +2
*(u16 *)(r0 +12) = 1
exit
r0 = 1
exit""", 'R0 cannot write into rdonly_mem'),
    _c("dynptr_read_write", """
r6 = r1
r1 = r6
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -24
r2 = 8
r3 = r10
r3 += -16
r4 = 0
r5 = 0
call 201
r1 = r10
r1 += -16
r2 = 0
r3 = r10
r3 += -24
r4 = 8
r5 = 0
call 202
r0 = 2
exit""", None),
    _c("dynptr_read_uninit", """
r1 = r10
r1 += -24
r2 = 8
r3 = r10
r3 += -16
r4 = 0
r5 = 0
call 201
r0 = 2
exit""", 'Expected an initialized dynptr as arg #2', err=errno.EINVAL),
    _c("dynptr_write_nonstack", """
r6 = r1
r1 = r6
r2 = 0
r3 = r10
r3 += -16
r4 = 0
r5 = 0
call 202
r0 = 2
exit""", 'R1 type=ctx expected=fp, dynptr_ptr'),
    _c("dynptr_uninit_slice", """
r1 = r10
r1 += -16
r2 = 0
r3 = 0
r4 = 14
call KFUNC(bpf_dynptr_slice)
r0 = 1
exit""", 'Expected an initialized dynptr as arg #0', err=errno.EINVAL),
    _c("dynptr_bad_ctx", """
r1 = 0
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r0 = 2
exit""", 'Possibly NULL pointer passed to trusted arg0'),
    _c("dynptr_misaligned", """
r2 = 0
r3 = r10
r3 += -12
call KFUNC(bpf_dynptr_from_xdp)
r0 = 2
exit""", 'Dynptr has to be an uninitialized dynptr', err=errno.EINVAL),
    _c("dynptr_nonstack", """
r6 = r1
r2 = 0
r3 = r6
call KFUNC(bpf_dynptr_from_xdp)
r0 = 2
exit""", 'arg#2 expected pointer to stack or const struct bpf_dynptr', err=errno.EINVAL),
    _c("dynptr_overwrite", """
r6 = r1
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = 0
*(u64 *)(r10 -16) = r1
r1 = r10
r1 += -16
call KFUNC(bpf_dynptr_size)
r0 = 1
exit""", 'Expected an initialized dynptr as arg #0', err=errno.EINVAL),
    _c("dynptr_read_slot", """
r6 = r1
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r0 = *(u64 *)(r10 -16)
exit""", 'invalid read from stack off -16+0 size 8'),
    _c("dynptr_size", """
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
call KFUNC(bpf_dynptr_size)
exit""", None),
    _c("dynptr_slice_varlen", """
r6 = r1
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
call 7
r4 = r0
r1 = r10
r1 += -16
r2 = 0
r3 = 0
call KFUNC(bpf_dynptr_slice)
r0 = 1
exit""", 'R4 must be a known constant', err=errno.EINVAL),
    _c("dynptr_slice_buf", """
r6 = r1
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
r2 = 0
r3 = r10
r3 += -32
r4 = 14
call KFUNC(bpf_dynptr_slice)
r0 = 1
exit""", None),
    _c("dynptr_slice_buf_small", """
r6 = r1
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
r2 = 0
r3 = r10
r3 += -32
r4 = 24
call KFUNC(bpf_dynptr_slice)
r0 = 1
exit""", 'arg#2 arg#3 memory, len pair leads to invalid memory access'),
    _c("unbound_meta", """
r2 = r10
r2 += -8
call KFUNC(bpf_xdp_metadata_rx_timestamp)
r0 = 2
exit""", 'metadata kfuncs require device-bound program', err=errno.EINVAL),
    _c("nongpl", """
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r0 = 2
exit""", 'cannot call kernel function from non-GPL compatible program', license="MIT",
       err=errno.EINVAL),
    _c("csum_over_dynptr", """
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -24
r2 = 24
r3 = 0
r4 = 0
r5 = 0
call 28
r0 = 1
exit""", 'invalid read from stack R1 off -24+8 size 24'),
    # a nullable memory argument (bpf_csum_diff's from) takes a map value that may be
    # NULL, its size checked against the value as if it were not
    *(_c(f"csum_diff_map_value_or_null_{size}", f"""
r1 = *(u32 *)(r1 +16)
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
r1 = r0
r2 = {size}
r3 = 0
r4 = 0
r5 = 0
call 28
r0 = 2
exit""", linux, processed=processed) for size, linux, processed in (
        (4, None, 14), (20, "R1 min value is outside of the allowed memory range", 0))),
    _c("slice_rdwr_write", """
r6 = r1
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
r2 = 0
r3 = 0
r4 = 14
call KFUNC(bpf_dynptr_slice_rdwr)
if r0 == 0 goto +3
r1 = 7
*(u16 *)(r0 +12) = r1
r0 = 2
exit""", None),
    _c("slice_after_adjust_head", """
r6 = r1
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
r2 = 0
r3 = 0
r4 = 14
call KFUNC(bpf_dynptr_slice_rdwr)
if r0 == 0 goto +6
r7 = r0
r1 = r6
r2 = 0
call 44
r0 = *(u8 *)(r7 +0)
exit
r0 = 1
exit""", "R7 invalid mem access 'scalar'"),
    _c("slice_after_overwrite", """
r6 = r1
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
r2 = 0
r3 = 0
r4 = 14
call KFUNC(bpf_dynptr_slice)
if r0 == 0 goto +4
r1 = 0
*(u64 *)(r10 -8) = r1
r0 = *(u8 *)(r0 +0)
exit
r0 = 1
exit""", None),
    _c("dynptr_flags_ptr", """
r6 = r1
r2 = r10
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r0 = 2
exit""", 'R2 is not a scalar', err=errno.EINVAL),
    _c("dynptr_ctx_wrong", """
r1 = r10
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r0 = 2
exit""", 'arg#0 expected pointer to ctx, but got fp', err=errno.EINVAL),
    _c("dynptr_ctx_off", """
r1 += 4
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r0 = 2
exit""", 'dereference of modified ctx ptr R1 off=4 disallowed'),
    _c("dynptr_at_minus8", """
r2 = 0
r3 = r10
r3 += -8
call KFUNC(bpf_dynptr_from_xdp)
r0 = 2
exit""", 'Dynptr has to be an uninitialized dynptr', err=errno.EINVAL),
    _c("dynptr_uninit_r2", """
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r0 = 2
exit""", 'R2 is not a scalar', err=errno.EINVAL),
    _c("dynptr_adjust_ok", """
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
r2 = 2
r3 = 10
call KFUNC(bpf_dynptr_adjust)
r0 = 2
exit""", None),
    _c("dynptr_clone", """
r2 = 0
r3 = r10
r3 += -16
call KFUNC(bpf_dynptr_from_xdp)
r1 = r10
r1 += -16
r2 = r10
r2 += -32
call KFUNC(bpf_dynptr_clone)
r1 = r10
r1 += -32
call KFUNC(bpf_dynptr_size)
exit""", None),
    _c("ct_lookup_leak", """
r2 = r10
r2 += -40
r3 = 12
r4 = r10
r4 += -16
r5 = 12
call KFUNC(bpf_xdp_ct_lookup)
r0 = 2
exit""", 'BPF_EXIT instruction in main prog would lead to reference leak', err=errno.EINVAL),
    _c("ct_lookup_release", """
r2 = r10
r2 += -40
r3 = 12
r4 = r10
r4 += -16
r5 = 12
call KFUNC(bpf_xdp_ct_lookup)
if r0 == 0 goto +2
r1 = r0
call KFUNC(bpf_ct_release)
r0 = 2
exit""", None),
    # reg_not_null: a referenced kernel pointer, once checked, is never NULL again
    _c("ct_second_null_check", """
r2 = r10
r2 += -40
r3 = 12
r4 = r10
r4 += -16
r5 = 12
call KFUNC(bpf_xdp_ct_lookup)
r6 = r0
if r6 == 0 goto +5
if r6 == 0 goto +4
r1 = r6
call KFUNC(bpf_ct_release)
r0 = 2
exit
r0 = 1
exit""", None),
    _c("ct_release_null", """
r2 = r10
r2 += -40
r3 = 12
r4 = r10
r4 += -16
r5 = 12
call KFUNC(bpf_xdp_ct_lookup)
r1 = r0
call KFUNC(bpf_ct_release)
r0 = 2
exit""", 'Possibly NULL pointer passed to trusted arg0'),
    _c("ct_release_twice", """
r2 = r10
r2 += -40
r3 = 12
r4 = r10
r4 += -16
r5 = 12
call KFUNC(bpf_xdp_ct_lookup)
if r0 == 0 goto +4
r6 = r0
r1 = r0
call KFUNC(bpf_ct_release)
r1 = r6
call KFUNC(bpf_ct_release)
r0 = 2
exit""", 'arg#0 pointer type STRUCT nf_conn must point to scalar, or struct with scalar',
       err=errno.EINVAL),
    _c("ct_release_scalar", """
r1 = 5
call KFUNC(bpf_ct_release)
r0 = 2
exit""", 'arg#0 pointer type STRUCT nf_conn must point to scalar, or struct with scalar',
       err=errno.EINVAL),
    _c("ct_release_stack", """
r1 = r10
r1 += -8
call KFUNC(bpf_ct_release)
r0 = 2
exit""", 'arg#0 pointer type STRUCT nf_conn must point to scalar, or struct with scalar',
       err=errno.EINVAL),
    _c("ct_insert_wrongtype", """
r2 = r10
r2 += -40
r3 = 12
r4 = r10
r4 += -16
r5 = 12
call KFUNC(bpf_xdp_ct_lookup)
if r0 == 0 goto +3
r6 = r0
r1 = r0
call KFUNC(bpf_ct_insert_entry)
r0 = 2
exit""",
       'kernel function bpf_ct_insert_entry args#0 expected pointer to STRUCT '
       'nf_conn___init but R1 has a pointer to STRUCT nf_conn', err=errno.EINVAL),
    _c("ct_lookup_badsz", """
r2 = r10
r2 += -40
call 7
r3 = r0
r4 = r10
r4 += -16
r5 = 12
r1 = r6
call KFUNC(bpf_xdp_ct_lookup)
r0 = 2
exit""", 'R6 !read_ok'),
    _c("ct_lookup_mem_oob", """
r6 = r1
r2 = r10
r2 += -8
r3 = 12
r4 = r10
r4 += -16
r5 = 12
r1 = r6
call KFUNC(bpf_xdp_ct_lookup)
r0 = 2
exit""", 'arg#1 arg#2 memory, len pair leads to invalid memory access', err=errno.EINVAL),
    _c("ct_read_field", """
r2 = r10
r2 += -40
r3 = 12
r4 = r10
r4 += -16
r5 = 12
call KFUNC(bpf_xdp_ct_lookup)
if r0 == 0 goto +4
r6 = *(u32 *)(r0 +0)
r1 = r0
call KFUNC(bpf_ct_release)
r0 = 2
exit""", None),
    _c("ct_change_timeout_null", """
r2 = r10
r2 += -40
r3 = 12
r4 = r10
r4 += -16
r5 = 12
call KFUNC(bpf_xdp_ct_lookup)
r6 = r0
r1 = r0
r2 = 10
call KFUNC(bpf_ct_change_timeout)
r0 = 2
exit""", 'Possibly NULL pointer passed to trusted arg0'),
    _c("meta_ts", """
r2 = r10
r2 += -8
call KFUNC(bpf_xdp_metadata_rx_timestamp)
r0 = 2
exit""", None, bound=True),
    _c("meta_ts_read", """
r2 = r10
r2 += -8
call KFUNC(bpf_xdp_metadata_rx_timestamp)
r0 = *(u64 *)(r10 -8)
r0 = 2
exit""", None, bound=True),
    _c("meta_ts_short", """
r2 = r10
r2 += -4
call KFUNC(bpf_xdp_metadata_rx_timestamp)
r0 = 2
exit""", 'invalid read from stack R2 off=-4 size=8', bound=True, err=errno.EINVAL),
    _c("meta_ts_null", """
r2 = 0
call KFUNC(bpf_xdp_metadata_rx_timestamp)
r0 = 2
exit""", 'Possibly NULL pointer passed to trusted arg1', bound=True),
    _c("meta_ts_ctx", """
r2 = r1
call KFUNC(bpf_xdp_metadata_rx_timestamp)
r0 = 2
exit""", 'R2 type=ctx expected=fp', bound=True),
    _c("meta_hash_map", """
r6 = r1
r2 = 0
*(u32 *)(r10 -8) = r2
r2 = r10
r2 += -8
r1 = MAP(arr)
call 1
if r0 == 0 goto +5
r2 = r0
r3 = r0
r3 += 12
r1 = r6
call KFUNC(bpf_xdp_metadata_rx_hash)
r0 = 2
exit""", None, bound=True),
    _c("meta_hash_map_oob", """
r6 = r1
r2 = 0
*(u32 *)(r10 -8) = r2
r2 = r10
r2 += -8
r1 = MAP(arr)
call 1
if r0 == 0 goto +5
r2 = r0
r3 = r0
r3 += 13
r1 = r6
call KFUNC(bpf_xdp_metadata_rx_hash)
r0 = 2
exit""", 'R3 min value is outside of the allowed memory range', bound=True),
    _c("meta_vlan_pkt", """
r6 = r1
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 4
if r4 > r3 goto +4
r3 = r2
r3 += 2
r1 = r6
call KFUNC(bpf_xdp_metadata_rx_vlan_tag)
r0 = 2
exit""", None, bound=True),
    _c("meta_ts_fp_ctx", """
r1 = r10
r2 = r10
r2 += -8
call KFUNC(bpf_xdp_metadata_rx_timestamp)
r0 = 2
exit""", 'arg#0 expected pointer to ctx, but got fp', bound=True, err=errno.EINVAL),
    # bpf_xdp_pull_data (6.18): packet-changing, so packet pointers checked before it are
    # forgotten, also when a global function the program calls pulls
    _c("pull_data_recheck", """
r6 = r1
r1 = r6
r2 = 64
call KFUNC(bpf_xdp_pull_data)
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r4 = r2
r4 += 14
if r4 > r3 goto +1
r0 = *(u8 *)(r2 +13)
r0 = 2
exit""", None, flags=32),
    _c("pull_data_stale_pkt", """
r6 = r1
r7 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r4 = r7
r4 += 14
if r4 > r3 goto +4
r1 = r6
r2 = 64
call KFUNC(bpf_xdp_pull_data)
r0 = *(u8 *)(r7 +0)
r0 = 2
exit""", "R7 invalid mem access 'scalar'"),
    _c("pull_data_not_ctx", """
r1 = r10
r1 += -8
r2 = 64
call KFUNC(bpf_xdp_pull_data)
r0 = 2
exit""", "arg#0 expected pointer to ctx, but got fp", err=errno.EINVAL),
    _c("pull_data_pointer_len", """
r1 = r1
r2 = r10
call KFUNC(bpf_xdp_pull_data)
r0 = 2
exit""", "R2 is not a scalar", err=errno.EINVAL),
    _c("pull_data_in_global", """
r6 = r1
r7 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r4 = r7
r4 += 14
if r4 > r3 goto +4
r1 = r6
call g1
r0 = *(u8 *)(r7 +0)
r0 = 2
exit
g1:
r2 = 64
call KFUNC(bpf_xdp_pull_data)
r0 = 0
exit""", "R7 invalid mem access 'scalar'", funcs=(Func("main", True, ("ctx",)),
                                                 Func("g1", True, ("ctx",)))),
    # ringbuf dynptrs: a reservation is a reference, kept in the dynptr's slots, that
    # submit or discard ends (even when the reservation failed: the dynptr is then null);
    # its slots cannot be overwritten, its clones and slices go with it
    _c("rbd_submit", _RBD + _RBD_EXIT, None),
    _c("rbd_discard", _RBD + "r1 = r10\nr1 += -16\nr2 = 0\ncall 200\nr0 = 2\nexit", None),
    _c("rbd_var_size", "r6 = *(u32 *)(r1 +12)\n" + _RBD.replace("r2 = 16", "r2 = r6") +
       _RBD_EXIT, None),
    _c("rbd_leak", _RBD + "r0 = 2\nexit", _LEAK, err=errno.EINVAL),
    _c("rbd_leak_failed", _RBD + "if r0 != 0 goto +4\n" + _RBD_EXIT, _LEAK, err=errno.EINVAL),
    _c("rbd_submit_twice", _RBD + _RBD_SUB + _RBD_EXIT, _UNACQ, err=errno.EINVAL),
    _c("rbd_overwrite", _RBD + "r1 = 0\n*(u64 *)(r10 -8) = r1\n" + _RBD_EXIT,
       "cannot overwrite referenced dynptr", err=errno.EINVAL),
    _c("rbd_reserve_again", _RBD + _RBD + _RBD_EXIT, "cannot overwrite referenced dynptr",
       err=errno.EINVAL),
    _c("rbd_submit_uninit", _RBD_EXIT, _UNACQ, err=errno.EINVAL),
    _c("rbd_submit_xdp", "r2 = 0\nr3 = r10\nr3 += -16\ncall KFUNC(bpf_dynptr_from_xdp)\n" +
       _RBD_EXIT, _UNACQ, err=errno.EINVAL),
    _c("rbd_submit_offset", _RBD + "r1 = r10\nr1 += -12\nr2 = 0\ncall 199\n" + _RBD_EXIT,
       _UNACQ, err=errno.EINVAL),
    _c("rbd_not_ringbuf", _RBD.replace("MAP(rb)", "MAP(arr)") + _RBD_EXIT,
       "cannot pass map_type 2 into func bpf_ringbuf_reserve_dynptr#198", err=errno.EINVAL),
    _c("rbd_load_slot", _RBD + "r0 = *(u64 *)(r10 -16)\n" + _RBD_EXIT,
       "invalid read from stack off -16+0 size 8"),
    _c("rbd_data", _RBD + _RBD_DATA + "if r0 == 0 goto +2\nr1 = 7\n*(u64 *)(r0 +0) = r1\n" +
       _RBD_EXIT, None),
    _c("rbd_data_oob", _RBD + _RBD_DATA + "if r0 == 0 goto +2\nr1 = 7\n*(u64 *)(r0 +4) = r1\n"
       + _RBD_EXIT, "R0 min value is outside of the allowed memory range"),
    _c("rbd_data_unchecked", _RBD + _RBD_DATA + "r1 = 7\n*(u64 *)(r0 +0) = r1\n" + _RBD_EXIT,
       "R0 invalid mem access 'mem_or_null'"),
    _c("rbd_data_after_submit", _RBD + _RBD_DATA + "r6 = r0\n" + _RBD_SUB +
       "if r6 == 0 goto +2\nr1 = 7\n*(u64 *)(r6 +0) = r1\nr0 = 2\nexit",
       "R6 invalid mem access 'scalar'"),
    _c("rbd_data_var_len", "r6 = *(u32 *)(r1 +12)\n" + _RBD +
       _RBD_DATA.replace("r3 = 8", "r3 = r6") + _RBD_EXIT, "R3 is not a known constant'"),
    _c("rbd_data_of_xdp", "r2 = 0\nr3 = r10\nr3 += -16\ncall KFUNC(bpf_dynptr_from_xdp)\n" +
       _RBD_DATA + "if r0 == 0 goto +1\nr0 = *(u64 *)(r0 +0)\nr0 = 2\nexit", None),
    _c("rbd_read_write", _RBD + """r1 = r10
r1 += -16
r2 = 0
r3 = r10
r3 += -24
r4 = 8
r5 = 0
*(u64 *)(r10 -24) = r5
call 202
r1 = r10
r1 += -32
r2 = 8
r3 = r10
r3 += -16
r4 = 0
r5 = 0
call 201
""" + _RBD_EXIT, None),
    _c("rbd_clone_submit", _RBD + """r1 = r10
r1 += -16
r2 = r10
r2 += -32
call KFUNC(bpf_dynptr_clone)
r1 = r10
r1 += -32
r2 = 0
call 199
r0 = 2
exit""", None),
    _c("rbd_clone_released", _RBD + """r1 = r10
r1 += -16
r2 = r10
r2 += -32
call KFUNC(bpf_dynptr_clone)
r1 = r10
r1 += -32
r2 = 0
call 199
r1 = r10
r1 += -16
r2 = 0
call 200
r0 = 2
exit""", _UNACQ, err=errno.EINVAL),
    _c("rbd_slice_after_submit", _RBD + """r1 = r10
r1 += -16
r2 = 0
r3 = 0
r4 = 4
call KFUNC(bpf_dynptr_slice_rdwr)
r6 = r0
""" + _RBD_SUB + """if r6 == 0 goto +1
r0 = *(u32 *)(r6 +0)
r0 = 2
exit""", "R6 invalid mem access 'scalar'"),
    # The ringbuf dynptr program tests/kernel/test_ringbuf_dynptr_kernel.py runs on Linux:
    # arr[0] = {size, flags, write offset, discard}; arr[1] = {reserve's r0, write's r0,
    # dynptr_data non-NULL, read's r0}. The record: 0xabcd through bpf_dynptr_data at 0,
    # then (data_end - data) << 32 | 0x55667788 written at the offset.
    _c("rbd_run", """
r6 = r1
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
r7 = r0
r1 = 1
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
r8 = r0
if r7 == 0 goto out
if r8 == 0 goto out
r2 = *(u32 *)(r7 +0)
r3 = *(u32 *)(r7 +4)
r1 = MAP(rb)
r4 = r10
r4 += -16
call 198
*(u32 *)(r8 +0) = r0
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r3 -= r2
r3 <<= 32
r3 |= 0x55667788
*(u64 *)(r10 -24) = r3
r1 = r10
r1 += -16
r2 = *(u32 *)(r7 +8)
r3 = r10
r3 += -24
r4 = 8
r5 = 0
call 202
*(u32 *)(r8 +4) = r0
r1 = r10
r1 += -16
r2 = 0
r3 = 8
call 203
r1 = 0
if r0 == 0 goto +3
r2 = 0xabcd
*(u32 *)(r0 +0) = r2
r1 = 1
*(u32 *)(r8 +8) = r1
r1 = r10
r1 += -32
r2 = 8
r3 = r10
r3 += -16
r4 = 4
r5 = 0
call 201
*(u32 *)(r8 +12) = r0
r1 = r10
r1 += -16
r2 = 0
r0 = *(u32 *)(r7 +12)
if r0 != 0 goto +2
call 199
goto +1
call 200
out:
r0 = 2
exit""", None),
    # bpf_dynptr_from_mem: a LOCAL dynptr over a map value (only), unreferenced
    _c("from_mem_data", _FROM_MEM + """r1 = r10
r1 += -24
r2 = 0
r3 = 8
call 203
if r0 == 0 goto out
r1 = 5
*(u64 *)(r0 +0) = r1
out:
r0 = 2
exit""", None),
    _c("from_mem_stack", "r1 = r10\nr1 += -40\nr2 = 16\nr3 = 0\nr4 = r10\nr4 += -24\n"
       "call 197\nr0 = 2\nexit", "Unsupported reg type fp for bpf_dynptr_from_mem data"),
    _c("from_mem_too_long", _FROM_MEM.replace("r2 = 16", "r2 = 17") + "out:\nr0 = 2\nexit",
       "R1 min value is outside of the allowed memory range"),
    _c("from_mem_overwrite", _FROM_MEM + "r1 = 0\n*(u64 *)(r10 -24) = r1\nout:\nr0 = 2\nexit",
       None),
    _c("from_mem_submit", _FROM_MEM + "r1 = r10\nr1 += -24\nr2 = 0\ncall 199\nout:\nr0 = 2\n"
       "exit", _UNACQ, err=errno.EINVAL),
    # bpf_func_proto.pkt_access: only some helpers take packet pointers
    _c("pkt_to_dynptr_read", _PKT64 + "r2 = 0\nr3 = r10\nr3 += -16\n"
       "call KFUNC(bpf_dynptr_from_xdp)\nr1 = r6\nr2 = 8\nr3 = r10\nr3 += -16\nr4 = 0\n"
       "r5 = 0\ncall 201\nout:\nr0 = 2\nexit", _NO_PKT),
    _c("pkt_to_ringbuf_output", _PKT64 + "r1 = MAP(rb)\nr2 = r6\nr3 = 8\nr4 = 0\ncall 130\n"
       "out:\nr0 = 2\nexit", _NO_PKT),
    _c("pkt_to_fib_lookup", _PKT64 + "r2 = r6\nr3 = 64\nr4 = 0\ncall 69\nout:\nr0 = 2\nexit",
       _NO_PKT),
    _c("pkt_to_dynptr_from_mem", "r1 = *(u32 *)(r1 +0)\nr2 = 0\nr3 = 0\nr4 = r10\n"
       "r4 += -24\ncall 197\nr0 = 2\nexit", _NO_PKT),
    _c("pkt_to_csum_diff", _PKT64 + "r1 = r6\nr2 = 4\nr3 = 0\nr4 = 0\nr5 = 0\ncall 28\n"
       "out:\nr0 = 2\nexit", None),
    _c("pkt_to_map_lookup", _PKT64 + "r1 = MAP(hash)\nr2 = r6\ncall 1\nout:\nr0 = 2\nexit",
       None),
    # -- global functions: verified on their own from their BTF prototypes ----------------
    _c('g_scalar', """
r1 = 5
call pc+2
r0 = 2
exit
r0 = r1
exit""", None, funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('int',)))),
    _c('g_static_scalar', """
r1 = 5
call pc+2
r0 = 2
exit
r0 = r1
exit""", None, funcs=(Func('main', True, ('ctx',)), Func('g1', False, ('int',)))),
    _c('g_ptr_as_scalar', """
r1 = r10
call pc+2
r0 = 2
exit
r0 = 0
exit""",
       "Caller passes invalid args into func#1 ('g1')",
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('int',))), err=errno.EINVAL),
    _c('g_ctx', """
call pc+2
r0 = 2
exit
r0 = *(u32 *)(r1 +0)
exit""",
       'At subprogram exit the register R0 is not a scalar value (pkt)',
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('ctx',))), err=errno.EINVAL),
    _c('g_ctx_wrong', """
r1 = 0
call pc+2
r0 = 2
exit
r0 = 0
exit""",
       "Caller passes invalid args into func#1 ('g1')",
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('ctx',))), err=errno.EINVAL),
    _c('g_ctx_pkt', """
call pc+4
r0 = 2
exit
r0 = 0
exit
r2 = *(u32 *)(r1 +0)
r0 = *(u8 *)(r2 +0)
exit""", 'unreachable insn 3', funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('ctx',))),
       err=errno.EINVAL),
    _c('g_mem_nullck', """
r1 = r10
r1 += -8
r2 = 0
*(u64 *)(r10 -8) = r2
call pc+2
r0 = 2
exit
r0 = *(u64 *)(r1 +0)
exit""",
       "R1 invalid mem access 'mem_or_null'",
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('mem:8',)))),
    _c('g_mem_ok', """
r1 = r10
r1 += -8
r2 = 0
*(u64 *)(r10 -8) = r2
call pc+2
r0 = 2
exit
r0 = 0
if r1 == 0 goto +1
r0 = *(u64 *)(r1 +0)
exit""", None, funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('mem:8',)))),
    _c('g_mem_oob', """
r1 = r10
r1 += -8
r2 = 0
*(u64 *)(r10 -8) = r2
call pc+2
r0 = 2
exit
r0 = 0
if r1 == 0 goto +1
r0 = *(u64 *)(r1 +4)
exit""",
       'R1 min value is outside of the allowed memory range',
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('mem:8',)))),
    _c('g_mem_small', """
r1 = r10
r1 += -4
r2 = 0
*(u32 *)(r10 -4) = r2
call pc+2
r0 = 2
exit
r0 = 0
exit""",
       "Caller passes invalid args into func#1 ('g1')",
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('mem:8',))), err=errno.EINVAL),
    _c('g_mem_null', """
r1 = 0
call pc+2
r0 = 2
exit
r0 = 0
exit""", None, funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('mem:8',)))),
    _c('g_ret_ptr', """
call pc+2
r0 = 2
exit
r0 = r1
exit""",
       'At subprogram exit the register R0 is not a scalar value (ctx)',
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('ctx',))), err=errno.EINVAL),
    _c('g_ret_uninit', """
call pc+2
r0 = 2
exit
exit""", 'R0 !read_ok', funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('ctx',)))),
    _c('g_void', """
call pc+2
r0 = 2
exit
r0 = 0
exit""",
       "Caller passes invalid args into func#1 ('g1')",
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('ctx',), ret='void')),
       err=errno.EINVAL),
    _c('g_r0_is_scalar', """
call pc+2
r0 = *(u8 *)(r0 +0)
exit
r0 = 0
exit""",
       "R0 invalid mem access 'scalar'",
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('ctx',)))),
    _c('g_caller_r1_gone', """
call pc+2
r0 = r1
exit
r0 = 0
exit""", 'R1 !read_ok', funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('ctx',)))),
    _c('g_pkt_invalidated', """
r6 = *(u32 *)(r1 +0)
r7 = *(u32 *)(r1 +4)
r2 = r6
r2 += 1
if r2 > r7 goto +3
call pc+4
r0 = *(u8 *)(r6 +0)
exit
r0 = 1
exit
r2 = 0
call 44
r0 = 0
exit""",
       "R6 invalid mem access 'scalar'",
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('ctx',)))),
    _c('g_pkt_kept', """
r6 = *(u32 *)(r1 +0)
r7 = *(u32 *)(r1 +4)
r2 = r6
r2 += 1
if r2 > r7 goto +3
call pc+4
r0 = *(u8 *)(r6 +0)
exit
r0 = 1
exit
r0 = 0
exit""", None, funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('ctx',)))),
    _c('g_voidptr', """
r1 = r10
r1 += -8
call pc+2
r0 = 2
exit
r0 = 0
exit""",
       "Caller passes invalid args into func#1 ('g1')",
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('void*',))), err=errno.EINVAL),
    _c('g_stack_combined', """
r1 = 0
*(u64 *)(r10 -400) = r1
r1 = 0
call pc+2
r0 = 0
exit
r2 = 0
*(u64 *)(r10 -200) = r2
r0 = 0
exit""",
       'combined stack size of 2 calls is 608. Too large',
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('int',)))),
    _c('g_bad_body_after_good_main', """
r1 = 1
call pc+2
r0 = 2
exit
r0 = *(u8 *)(r1 +0)
exit""",
       "R1 invalid mem access 'scalar'",
       funcs=(Func('main', True, ('ctx',)), Func('g1', True, ('int',)))),
    # A global function's struct bpf_dynptr * argument: an initialised dynptr of the caller
    # (any type), a read-only LOCAL dynptr (CONST_PTR_TO_DYNPTR) in the callee, which may
    # read it, slice it and pass it on, but neither load, store nor spill it.
    _c("g_dynptr_size", _GD_MAIN + "call KFUNC(bpf_dynptr_size)\nexit", None, funcs=_GD),
    _c("g_dynptr_read", _GD_MAIN + """
r3 = r1
r1 = r10
r1 += -8
r2 = 4
r4 = 0
r5 = 0
call 201
r0 = *(u32 *)(r10 -8)
exit""", None, funcs=_GD),
    _c("g_dynptr_write", _GD_MAIN + """
r6 = r1
r1 = 7
*(u32 *)(r10 -8) = r1
r1 = r6
r2 = 0
r3 = r10
r3 += -8
r4 = 4
r5 = 0
call 202
exit""", None, funcs=_GD),
    _c("g_dynptr_slice", _GD_MAIN + """
r2 = 0
r3 = 0
r4 = 4
call KFUNC(bpf_dynptr_slice)
if r0 == 0 goto +2
r0 = *(u32 *)(r0 +0)
exit
r0 = 0
exit""", None, funcs=_GD),
    _c("g_dynptr_slice_oob", _GD_MAIN + """
r2 = 0
r3 = 0
r4 = 4
call KFUNC(bpf_dynptr_slice)
if r0 == 0 goto +2
r0 = *(u32 *)(r0 +4)
exit
r0 = 0
exit""", "R0 min value is outside of the allowed memory range", funcs=_GD),
    _c("g_dynptr_clone", _GD_MAIN + """
r2 = r10
r2 += -16
call KFUNC(bpf_dynptr_clone)
r1 = r10
r1 += -16
call KFUNC(bpf_dynptr_size)
exit""", None, funcs=_GD),
    _c("g_dynptr_pass_on", _GD_MAIN + "call g2\nexit\ng2:\ncall KFUNC(bpf_dynptr_size)\nexit",
       None, funcs=_GD + (Func("g2", True, ("dynptr",)),)),
    _c("g_dynptr_static_pass_on", _GD_MAIN +
       "call g2\nexit\ng2:\ncall KFUNC(bpf_dynptr_size)\nexit",
       None, funcs=_GD + (Func("g2", False, ("dynptr",)),)),
    _c("g_dynptr_kfunc_ctx_arg", _GD_MAIN + """
r3 = r1
r1 = 0
r2 = 0
call KFUNC(bpf_dynptr_from_xdp)
r0 = 0
exit""", "Possibly NULL pointer passed to trusted arg0", funcs=_GD),
    _c("g_dynptr_load", _GD_MAIN + "r0 = *(u64 *)(r1 +0)\nexit",
       "R1 invalid mem access 'dynptr_ptr'", funcs=_GD),
    _c("g_dynptr_store", _GD_MAIN + "r2 = 0\n*(u64 *)(r1 +0) = r2\nr0 = 0\nexit",
       "R1 invalid mem access 'dynptr_ptr'", funcs=_GD),
    _c("g_dynptr_modified", _GD_MAIN + "r1 += 8\ncall KFUNC(bpf_dynptr_size)\nexit",
       "dereference of modified dynptr_ptr ptr R1 off=8 disallowed", funcs=_GD),
    _c("g_dynptr_modified_helper", _GD_MAIN + """
r3 = r1
r3 += 8
r1 = r10
r1 += -8
r2 = 4
r4 = 0
r5 = 0
call 201
r0 = 0
exit""", "dereference of modified dynptr_ptr ptr R3 off=8 disallowed", funcs=_GD),
    # not spillable (is_spillable_regtype): the slot holds data, its fill a scalar
    _c("g_dynptr_spill", _GD_MAIN + """
*(u64 *)(r10 -8) = r1
r1 = *(u64 *)(r10 -8)
call KFUNC(bpf_dynptr_size)
exit""", "arg#0 expected pointer to stack or const struct bpf_dynptr", funcs=_GD,
       err=errno.EINVAL),
    _c("g_dynptr_spill_narrow", _GD_MAIN + "*(u32 *)(r10 -8) = r1\nr0 = *(u32 *)(r10 -8)\nexit",
       None, funcs=_GD),
    _c("g_dynptr_uninit", "r1 = r10\nr1 += -16\ncall g1\nr0 = 2\nexit\ng1:\nr0 = 0\nexit",
       _CALLER_INVALID, funcs=_GD, err=errno.EINVAL),
    _c("g_dynptr_null", "r1 = 0\ncall g1\nr0 = 2\nexit\ng1:\nr0 = 0\nexit",
       _CALLER_INVALID, funcs=_GD, err=errno.EINVAL),
    _c("g_dynptr_ctx", "call g1\nr0 = 2\nexit\ng1:\nr0 = 0\nexit",
       _CALLER_INVALID, funcs=_GD, err=errno.EINVAL),
    _c("g_dynptr_second_slot", _GD_MAIN.replace("r1 += -16\ncall g1", "r1 += -8\ncall g1") +
       "r0 = 0\nexit", _CALLER_INVALID, funcs=_GD, err=errno.EINVAL),
    # arg:<tag> decl tags (__arg_ctx, __arg_nonnull, __arg_arena; __arg_nullable only with
    # __arg_trusted): a bad tag is the caller's error, -EOPNOTSUPP for an unknown one
    _c("t_ctx_void", _G1 + "r0 = *(u32 *)(r1 +0)\nr0 = 0\nexit", None, funcs=_gt("void*@ctx")),
    _c("t_ctx_xdp_md", _G1 + "r0 = *(u32 *)(r1 +0)\nr0 = 0\nexit", None,
       funcs=_gt("ctx@ctx")),
    _c("t_ctx_wrong_struct", _G1 + "r0 = 0\nexit", _CALLER_INVALID, funcs=_gt("mem:8@ctx"),
       err=errno.EINVAL),
    _c("t_ctx_on_int", "r1 = 0\n" + _G1 + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("int@ctx"), err=errno.EINVAL),
    _c("t_ctx_nonnull", _G1 + "r0 = 0\nexit", _CALLER_INVALID, funcs=_gt("void*@ctx@nonnull"),
       err=errno.EINVAL),
    _c("t_ctx_caller_stack", _G1_STACK + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("void*@ctx"), err=errno.EINVAL),
    _c("t_unknown_tag", _G1_STACK + "r0 = 0\nexit", _CALLER_INVALID, funcs=_gt("mem:8@bogus"),
       err=errno.EOPNOTSUPP),
    _c("t_nonnull_ok", _G1_STACK + "r0 = *(u64 *)(r1 +0)\nr0 = 0\nexit", None,
       funcs=_gt("mem:8@nonnull")),
    _c("t_nonnull_null", "r1 = 0\n" + _G1 + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("mem:8@nonnull"), err=errno.EINVAL),
    _c("t_nonnull_maybe_null", _LOOKUP.format(m="hash") + "r1 = r0\n" + _G1 + "r0 = 0\nexit",
       _CALLER_INVALID, funcs=_gt("mem:8@nonnull"), err=errno.EINVAL),
    _c("t_plain_maybe_null", _LOOKUP.format(m="hash") + "r1 = r0\n" + _G1 + "r0 = 0\nexit",
       None, funcs=_gt("mem:8")),
    _c("t_nonnull_callee_no_check", _G1_STACK + "r0 = *(u64 *)(r1 +0)\nexit", None,
       funcs=_gt("mem:8@nonnull")),
    _c("t_plain_callee_no_check", _G1_STACK + "r0 = *(u64 *)(r1 +0)\nexit",
       "R1 invalid mem access 'mem_or_null'", funcs=_gt("mem:8")),
    _c("t_pkt_to_nonnull", _PKT + """
r4 = r2
r4 += 8
r0 = 1
if r4 > r3 goto +2
r1 = r2
call g1
exit
g1:
r0 = *(u64 *)(r1 +0)
exit""", None, funcs=_gt("mem:8@nonnull")),
    _c("t_pkt_short_to_nonnull", _PKT + """
r4 = r2
r4 += 4
r0 = 1
if r4 > r3 goto +2
r1 = r2
call g1
exit
g1:
r0 = *(u64 *)(r1 +0)
exit""", _CALLER_INVALID, funcs=_gt("mem:8@nonnull"), err=errno.EINVAL),
    _c("t_nullable_mem", _G1_STACK + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("mem:8@nullable"), err=errno.EINVAL),
    _c("t_dynptr_tag", _G1_STACK + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("dynptr@nonnull"), err=errno.EINVAL),
    # an arena pointer: the caller passes a scalar (or PTR_TO_ARENA), the callee sees one
    _c("t_arena_scalar", "r1 = 5\n" + _G1 + "r0 = r1\nexit", None, funcs=_gt("void*@arena")),
    _c("t_arena_ptr", _G1_STACK + "r0 = 0\nexit", _CALLER_INVALID, funcs=_gt("void*@arena"),
       err=errno.EINVAL),
    _c("t_arena_deref", "r1 = 5\n" + _G1 + "r0 = *(u64 *)(r1 +0)\nexit",
       "R1 invalid mem access 'scalar'", funcs=_gt("void*@arena")),
    _c("t_arena_combined", "r1 = 5\n" + _G1 + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("void*@arena@nonnull"), err=errno.EINVAL),
    _c("t_trusted_nonnull", "r1 = 0\n" + _G1 + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("struct:nf_conn@trusted@nonnull"), err=errno.EINVAL),
    # __arg_trusted: the struct found in the kernel's BTF by CO-RE's candidate rule (one
    # match: xfrm_state; nf_conn also matches nf_conn___init: ambiguous)
    _c("t_trusted_xfrm", _XFRM_TO_G1 + "r0 = *(u32 *)(r1 +132)\nr0 = 0\nexit", None,
       funcs=_gt("struct:xfrm_state@trusted")),
    _c("t_trusted_xfrm_flavour", _XFRM_TO_G1 + "r0 = 0\nexit", None,
       funcs=_gt("struct:xfrm_state___local@trusted")),
    _c("t_trusted_ambiguous", _XFRM_TO_G1 + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("struct:nf_conn@trusted"), err=errno.ESRCH),
    _c("t_trusted_no_match", _XFRM_TO_G1 + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("struct:pyxdp_no_such_struct@trusted"), err=errno.ENOENT),
    _c("t_trusted_wrong_struct", _CT_LOOKUP + """
if r0 == 0 goto +6
r7 = r0
r1 = r0
call g1
r1 = r7
call KFUNC(bpf_ct_release)
r0 = 2
exit
g1:
r0 = 0
exit""", _CALLER_INVALID, funcs=_gt("struct:xfrm_state@trusted")),
    _c("t_trusted_null", "r1 = 0\n" + _G1 + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("struct:xfrm_state@trusted"), err=errno.EINVAL),
    _c("t_trusted_stack", _G1_STACK + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("struct:xfrm_state@trusted"), err=errno.EINVAL),
    _c("t_trusted_maybe_null", _XFRM_GET + """
r7 = r0
r1 = r0
call g1
if r7 == 0 goto +2
r1 = r7
call KFUNC(bpf_xdp_xfrm_state_release)
r0 = 2
exit
g1:
r0 = 0
exit""", _CALLER_INVALID, funcs=_gt("struct:xfrm_state@trusted")),
    _c("t_trusted_nullable_null", "r1 = 0\n" + _G1 + "r0 = 0\nexit", None,
       funcs=_gt("struct:xfrm_state@trusted@nullable")),
    _c("t_trusted_nullable_deref", "r1 = 0\n" + _G1 + "r0 = *(u32 *)(r1 +132)\nr0 = 0\nexit",
       "R1 invalid mem access 'trusted_ptr_or_null_'",
       funcs=_gt("struct:xfrm_state@trusted@nullable")),
    _c("t_trusted_nullable_checked", "r1 = 0\n" + _G1 +
       "r0 = 0\nif r1 == 0 goto +1\nr0 = *(u32 *)(r1 +132)\nr0 = 0\nexit", None,
       funcs=_gt("struct:xfrm_state@trusted@nullable")),
    _c("t_trusted_never_null", _XFRM_TO_G1 +
       "r0 = 0\nif r1 != 0 goto +1\nr0 = *(u64 *)(r10 +8)\nr0 = 0\nexit", None,
       funcs=_gt("struct:xfrm_state@trusted")),
    _c("t_trusted_release", _XFRM_TO_G1 +
       "call KFUNC(bpf_xdp_xfrm_state_release)\nr0 = 0\nexit",
       "release kernel function bpf_xdp_xfrm_state_release expects refcounted PTR_TO_BTF_ID",
       funcs=_gt("struct:xfrm_state@trusted"), err=errno.EINVAL),
    _c("t_trusted_store", _XFRM_TO_G1 + "r0 = 0\n*(u32 *)(r1 +132) = r0\nexit",
       "only read is supported",
       funcs=_gt("struct:xfrm_state@trusted")),
    # static functions: tags are logged, not enforced
    _c("t_static_tag", _G1_STACK + "r0 = 0\nexit", None,
       funcs=(Func("main", True, ("ctx",)), Func("g1", False, ("mem:8@nonnull",)))),
    _c("t_static_bogus", _G1_STACK + "r0 = 0\nexit", None,
       funcs=(Func("main", True, ("ctx",)), Func("g1", False, ("mem:8@bogus",)))),
    # a pointer passed on modified (check_func_arg_reg_off): the caller's error, -EACCES
    _c("g_ctx_modified_to_mem", "r1 += 4\n" + _G1 + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("mem:8")),
    _c("g_ctx_modified_to_ctx", "r1 += 4\n" + _G1 + "r0 = 0\nexit", _CALLER_INVALID,
       funcs=_gt("ctx")),
    _c("g_dynptr_modified_to_global", _GD_MAIN + "r1 += 8\ncall g2\nexit\ng2:\nr0 = 0\nexit",
       "Caller passes invalid args into func#2 ('g2')",
       funcs=_GD + (Func("g2", True, ("dynptr",)),)),
    # -- tail calls from functions: BTF required, 256 bytes of stack below a tail call -----
    _c('tc_nobtf_sub', """
r6 = r1
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = r6
call pc+2
r0 = 2
exit
r6 = r1
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
r0 = 0
exit""", 'tail_call is not allowed in subprogs without BTF', err=errno.EINVAL),
    _c('tc_nobtf_main', """
r6 = r1
r1 = 0
*(u64 *)(r10 -400) = r1
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
r1 = r6
call pc+2
r0 = 2
exit
r6 = r1
r1 = 0
*(u64 *)(r10 -8) = r1
r0 = 0
exit""", None),
    _c('tc_sub_small', """
r6 = r1
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = r6
call pc+2
r0 = 2
exit
r6 = r1
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
r0 = 0
exit""", None, funcs=(Func('main', True, ('ctx',)), Func('sub', False, ('ctx',)))),
    _c('tc_sub_main256', """
r6 = r1
r1 = 0
*(u64 *)(r10 -256) = r1
r1 = r6
call pc+2
r0 = 2
exit
r6 = r1
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
r0 = 0
exit""",
       'tail_calls are not allowed when call stack of previous frames is 256 bytes. Too large',
       funcs=(Func('main', True, ('ctx',)), Func('sub', False, ('ctx',)))),
    _c('tc_sub_main248', """
r6 = r1
r1 = 0
*(u64 *)(r10 -248) = r1
r1 = r6
call pc+2
r0 = 2
exit
r6 = r1
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
r0 = 0
exit""",
       'tail_calls are not allowed when call stack of previous frames is 256 bytes. Too large',
       funcs=(Func('main', True, ('ctx',)), Func('sub', False, ('ctx',)))),
    _c('tc_sub_main264', """
r6 = r1
r1 = 0
*(u64 *)(r10 -264) = r1
r1 = r6
call pc+2
r0 = 2
exit
r6 = r1
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
r0 = 0
exit""",
       'tail_calls are not allowed when call stack of previous frames is 272 bytes. Too large',
       funcs=(Func('main', True, ('ctx',)), Func('sub', False, ('ctx',)))),
    _c('tc_sub_big', """
r6 = r1
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = r6
call pc+2
r0 = 2
exit
r6 = r1
r1 = 0
*(u64 *)(r10 -400) = r1
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
r0 = 0
exit""", None, funcs=(Func('main', True, ('ctx',)), Func('sub', False, ('ctx',)))),
    _c('tc_main_and_sub', """
r6 = r1
r1 = 0
*(u64 *)(r10 -400) = r1
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
r1 = r6
call pc+2
r0 = 2
exit
r6 = r1
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
r0 = 0
exit""",
       'tail_calls are not allowed when call stack of previous frames is 400 bytes. Too large',
       funcs=(Func('main', True, ('ctx',)), Func('sub', False, ('ctx',)))),
    _c('tc_main_only', """
r6 = r1
r1 = 0
*(u64 *)(r10 -400) = r1
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
r1 = r6
call pc+2
r0 = 2
exit
r6 = r1
r1 = 0
*(u64 *)(r10 -8) = r1
r0 = 0
exit""", None, funcs=(Func('main', True, ('ctx',)), Func('sub', False, ('ctx',)))),
    # -- bpf_spin_lock: a map value's lock, found in its BTF -------------------------------
    _c('sl_ok', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r6 = r0
r1 = r6
r1 += 4
call 93
r1 = *(u32 *)(r6 +0)
r1 += 1
*(u32 *)(r6 +0) = r1
r1 = r6
r1 += 4
call 94
out:
r0 = 2
exit""", None),
    _c('sl_wrong_off', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r6 = r0
r1 = r6
call 93
r1 = r6
call 94
out:
r0 = 2
exit""", "off 0 doesn't point to 'struct bpf_spin_lock' that is at 4", err=errno.EINVAL),
    _c('sl_no_unlock', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r6 = r0
r1 = r6
r1 += 4
call 93
r0 = 2
exit
out:
r0 = 2
exit""", 'BPF_EXIT instruction in main prog cannot be used inside bpf_spin_lock-ed region',
       err=errno.EINVAL),
    _c('sl_unlock_only', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r6 = r0
r1 = r6
r1 += 4
call 94
out:
r0 = 2
exit""", 'bpf_spin_unlock without taking a lock', err=errno.EINVAL),
    _c('sl_twice', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r6 = r0
r1 = r6
r1 += 4
call 93
r1 = r6
r1 += 4
call 93
r1 = r6
r1 += 4
call 94
out:
r0 = 2
exit""", 'function calls are not allowed while holding a lock', err=errno.EINVAL),
    _c('sl_call_inside', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r6 = r0
r1 = r6
r1 += 4
call 93
call 7
r1 = r6
r1 += 4
call 94
out:
r0 = 2
exit""", 'function calls are not allowed while holding a lock', err=errno.EINVAL),
    _c('sl_touch_lock', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r6 = r0
r1 = r6
r1 += 4
call 93
r1 = *(u32 *)(r6 +4)
r1 = r6
r1 += 4
call 94
out:
r0 = 2
exit""", 'bpf_spin_lock cannot be accessed directly by load/store'),
    _c('sl_write_lock', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r6 = r0
r1 = 0
*(u32 *)(r6 +4) = r1
out:
r0 = 2
exit""", 'bpf_spin_lock cannot be accessed directly by load/store'),
    _c('sl_read_x', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r6 = r0
r1 = *(u32 *)(r6 +8)
out:
r0 = 2
exit""", None),
    _c('sl_nobtf', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
if r0 == 0 goto +4
r6 = r0
r1 = r6
call 93
r1 = r6
call 94
r0 = 2
exit""", "map 'arr' has to have BTF in order to use bpf_spin_lock", err=errno.EINVAL),
    _c('sl_var_off', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r6 = r0
call 7
r0 &= 4
r1 = r6
r1 += r0
call 93
r1 = r6
r1 += 4
call 94
out:
r0 = 2
exit""", "R1 doesn't have constant offset. bpf_spin_lock has to be at the constant offset",
       err=errno.EINVAL),
    _c('sl_branchy', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r6 = r0
r1 = r6
r1 += 4
call 93
r1 = *(u32 *)(r6 +8)
if r1 > 5 goto +2
r1 = 0
*(u32 *)(r6 +0) = r1
r1 = r6
r1 += 4
call 94
out:
r0 = 2
exit""", None),
    # -- BPF_F_STRICT_ALIGNMENT (prog_flags 1): packet accesses as if NET_IP_ALIGN were 2 ---
    _c('al_pkt_u16_12', """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 40
if r4 > r3 goto +2
r0 = *(u16 *)(r2 +12)
exit
r0 = 1
exit""", None, flags=1),
    _c('al_pkt_u32_12', """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 40
if r4 > r3 goto +2
r0 = *(u32 *)(r2 +12)
exit
r0 = 1
exit""", 'misaligned packet access off 2+0+0+12 size 4', flags=1),
    _c('al_pkt_u32_14', """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 40
if r4 > r3 goto +2
r0 = *(u32 *)(r2 +14)
exit
r0 = 1
exit""", None, flags=1),
    _c('al_pkt_u16_13', """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 40
if r4 > r3 goto +2
r0 = *(u16 *)(r2 +13)
exit
r0 = 1
exit""", 'misaligned packet access off 2+0+0+13 size 2', flags=1),
    _c('al_pkt_u16_13_loose', """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 40
if r4 > r3 goto +2
r0 = *(u16 *)(r2 +13)
exit
r0 = 1
exit""", None),
    _c('al_pkt_u64_26', """
r2 = *(u32 *)(r1 +0)
r3 = *(u32 *)(r1 +4)
r4 = r2
r4 += 40
if r4 > r3 goto +2
r0 = *(u64 *)(r2 +26)
exit
r0 = 1
exit""", 'misaligned packet access off 2+0+0+26 size 8', flags=1),
    _c('al_map_u32_2', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
if r0 == 0 goto +2
r0 = *(u32 *)(r0 +2)
exit
r0 = 1
exit""", 'misaligned value access off 0+0+2 size 4', flags=1),
    _c('al_map_u32_4', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
if r0 == 0 goto +2
r0 = *(u32 *)(r0 +4)
exit
r0 = 1
exit""", None, flags=1),
    _c('al_map_u64_4', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
if r0 == 0 goto +2
r0 = *(u64 *)(r0 +4)
exit
r0 = 1
exit""", 'misaligned value access off 0+0+4 size 8', flags=1),
    _c('al_map_u64_4_loose', """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
if r0 == 0 goto +2
r0 = *(u64 *)(r0 +4)
exit
r0 = 1
exit""", None),
    # -- loops Linux verifies until their states converge: open-coded iterators
    # (bpf_iter_num_*, what bpf_for/bpf_repeat expand to), may_goto (can_loop,
    # cond_break) and callbacks called again from their call ----------------------------
    _c("iter_basic", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r6 = 0
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r1 = *(u32 *)(r0 +0)
r6 += r1
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", None),
    _c("iter_leak", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r0 = 2
exit""", 'BPF_EXIT instruction in main prog would lead to reference leak', err=errno.EINVAL),
    _c("iter_next_uninit", """
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
r0 = 2
exit""", 'expected an initialized iter_num as arg #0', err=errno.EINVAL),
    _c("iter_new_twice", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r0 = 2
exit""", 'expected uninitialized iter_num as arg #0', err=errno.EINVAL),
    _c("iter_read_slot", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r0 = *(u64 *)(r10 -8)
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", 'invalid read from stack off -8+0 size 8'),
    _c("iter_write_slot", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r0 = 0
*(u64 *)(r10 -8) = r0
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", 'expected an initialized iter_num as arg #0', err=errno.EINVAL),
    _c("iter_misaligned", """
r1 = r10
r1 += -12
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r0 = 2
exit""", 'expected uninitialized iter_num as arg #0', err=errno.EINVAL),
    _c("iter_ctx_arg", """
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r0 = 2
exit""", 'arg#0 expected pointer to an iterator on stack', err=errno.EINVAL),
    _c("iter_nonconst", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r1 = *(u32 *)(r0 +0)
r0 = *(u32 *)(r0 +4)
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", 'R0 min value is outside of the allowed memory range'),
    _c("iter_write_r0", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r1 = 1
*(u32 *)(r0 +0) = r1
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", 'R0 cannot write into rdonly_mem'),
    _c("iter_no_nullck", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
r1 = *(u32 *)(r0 +0)
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", "R0 invalid mem access 'scalar'"),
    _c("iter_destroy_twice", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", 'expected an initialized iter_num as arg #0', err=errno.EINVAL),
    # the bits iterator (bpf_iter_bits_*): two stack slots; its pointer argument is
    # __ign, never checked (any value, even an unset register)
    _c("bits_basic", """
*(u64 *)(r10 -24) = 5
r1 = r10
r1 += -16
r2 = r10
r2 += -24
r3 = 1
call KFUNC(bpf_iter_bits_new)
r6 = 0
loop:
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_next)
if r0 == 0 goto out
r1 = *(u32 *)(r0 +0)
r6 += r1
goto loop
out:
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r0 = 2
exit""", None),
    _c("bits_ign_any", """
r6 = r1
r1 = r10
r1 += -16
r2 = r6
r3 = 600
call KFUNC(bpf_iter_bits_new)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r0 = 2
exit""", None),
    _c("bits_ign_uninit", """
r1 = r10
r1 += -16
r3 = 1
call KFUNC(bpf_iter_bits_new)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r0 = 2
exit""", None),
    _c("bits_leak", """
*(u64 *)(r10 -24) = 5
r1 = r10
r1 += -16
r2 = r10
r2 += -24
r3 = 1
call KFUNC(bpf_iter_bits_new)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_next)
r0 = 2
exit""", 'BPF_EXIT instruction in main prog would lead to reference leak', err=errno.EINVAL),
    _c("bits_one_slot", """
r1 = r10
r1 += -8
r2 = 0
r3 = 1
call KFUNC(bpf_iter_bits_new)
r0 = 2
exit""", 'expected uninitialized iter_bits as arg #0', err=errno.EINVAL),
    _c("bits_as_num", """
*(u64 *)(r10 -24) = 5
r1 = r10
r1 += -16
r2 = r10
r2 += -24
r3 = 1
call KFUNC(bpf_iter_bits_new)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_num_next)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r0 = 2
exit""", 'expected an initialized iter_num as arg #0', err=errno.EINVAL),
    _c("bits_num_as_bits", """
r1 = r10
r1 += -16
r2 = 0
r3 = 3
call KFUNC(bpf_iter_num_new)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_next)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", 'expected an initialized iter_bits as arg #0', err=errno.EINVAL),
    _c("bits_new_twice", """
*(u64 *)(r10 -24) = 5
r1 = r10
r1 += -16
r2 = r10
r2 += -24
r3 = 1
call KFUNC(bpf_iter_bits_new)
r1 = r10
r1 += -16
r2 = r10
r2 += -24
r3 = 1
call KFUNC(bpf_iter_bits_new)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r0 = 2
exit""", 'expected uninitialized iter_bits as arg #0', err=errno.EINVAL),
    _c("bits_write_r0", """
*(u64 *)(r10 -24) = 5
r1 = r10
r1 += -16
r2 = r10
r2 += -24
r3 = 1
call KFUNC(bpf_iter_bits_new)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_next)
if r0 == 0 goto out
r1 = 1
*(u32 *)(r0 +0) = r1
out:
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r0 = 2
exit""", 'R0 cannot write into rdonly_mem'),
    _c("bits_read_past", """
*(u64 *)(r10 -24) = 5
r1 = r10
r1 += -16
r2 = r10
r2 += -24
r3 = 1
call KFUNC(bpf_iter_bits_new)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_next)
if r0 == 0 goto out
r1 = *(u32 *)(r0 +4)
out:
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r0 = 2
exit""", 'R0 min value is outside of the allowed memory range'),
    _c("bits_clobber_hi", """
*(u64 *)(r10 -24) = 5
r1 = r10
r1 += -16
r2 = r10
r2 += -24
r3 = 1
call KFUNC(bpf_iter_bits_new)
r0 = 0
*(u64 *)(r10 -8) = r0
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_next)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r0 = 2
exit""", 'expected an initialized iter_bits as arg #0', err=errno.EINVAL),
    _c("bits_read_slot", """
*(u64 *)(r10 -24) = 5
r1 = r10
r1 += -16
r2 = r10
r2 += -24
r3 = 1
call KFUNC(bpf_iter_bits_new)
r0 = *(u64 *)(r10 -8)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r0 = 2
exit""", 'invalid read from stack off -8+0 size 8'),
    _c("bits_words_ptr", """
r1 = r10
r1 += -16
r2 = 0
r3 = r10
call KFUNC(bpf_iter_bits_new)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r0 = 2
exit""", 'R3 is not a scalar', err=errno.EINVAL),
    _c("bits_destroy_twice", """
*(u64 *)(r10 -24) = 5
r1 = r10
r1 += -16
r2 = r10
r2 += -24
r3 = 1
call KFUNC(bpf_iter_bits_new)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_bits_destroy)
r0 = 2
exit""", 'expected an initialized iter_bits as arg #0', err=errno.EINVAL),
    # the string kfuncs: strings are __ign (any value, a map value maybe NULL, an unset
    # register), characters, counts and lengths scalars
    _c("str_uninit_ign", """
call KFUNC(bpf_strlen)
r0 = 2
exit""", None),
    _c("str_ctx_pkt", """
r2 = *(u32 *)(r1 +0)
call KFUNC(bpf_strcmp)
r0 = 2
exit""", None),
    _c("str_map_null", """
r1 = 0
*(u32 *)(r10 -4) = r1
r1 = MAP(arr)
r2 = r10
r2 += -4
call 1
r1 = r0
r2 = r0
r3 = 3
call KFUNC(bpf_strnstr)
r0 = 2
exit""", None),
    _c("str_chr_ptr", """
r2 = r10
call KFUNC(bpf_strchr)
r0 = 2
exit""", 'R2 is not a scalar', err=errno.EINVAL),
    _c("str_chr_uninit", """
r1 = r10
r1 += -8
call KFUNC(bpf_strchr)
r0 = 2
exit""", 'R2 is not a scalar', err=errno.EINVAL),
    _c("str_nlen_ptr", """
r2 = r1
call KFUNC(bpf_strnlen)
r0 = 2
exit""", 'R2 is not a scalar', err=errno.EINVAL),
    _c("str_nstr_len_ptr", """
r2 = r1
r3 = r10
call KFUNC(bpf_strnstr)
r0 = 2
exit""", 'R3 is not a scalar', err=errno.EINVAL),
    _c("str_nchr_c_ptr", """
r2 = 4
r3 = r1
call KFUNC(bpf_strnchr)
r0 = 2
exit""", 'R3 is not a scalar', err=errno.EINVAL),
    _c("str_ret_scalar", """
r1 = 1
call KFUNC(bpf_strlen)
r0 = *(u32 *)(r0 +0)
exit""", "R0 invalid mem access 'scalar'"),
    # bpf_rcu_read_lock/_unlock (not nested) and bpf_preempt_disable/_enable (counted):
    # closed before the exit and a tail call
    _c("rcu_pair", """
call KFUNC(bpf_rcu_read_lock)
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", None),
    _c("rcu_nested", """
call KFUNC(bpf_rcu_read_lock)
call KFUNC(bpf_rcu_read_lock)
call KFUNC(bpf_rcu_read_unlock)
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", 'nested rcu read lock (kernel function bpf_rcu_read_lock)', err=errno.EINVAL),
    _c("rcu_unmatched", """
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", 'unmatched rcu read unlock (kernel function bpf_rcu_read_unlock)', err=errno.EINVAL),
    _c("rcu_leak", """
call KFUNC(bpf_rcu_read_lock)
r0 = 2
exit""", _IN_RCU, err=errno.EINVAL),
    _c("rcu_helper", """
call KFUNC(bpf_rcu_read_lock)
r1 = 0
*(u32 *)(r10 -4) = r1
r1 = MAP(arr)
r2 = r10
r2 += -4
call 1
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", None),
    _c("rcu_nested_leak", """
call KFUNC(bpf_rcu_read_lock)
call KFUNC(bpf_rcu_read_lock)
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", 'nested rcu read lock (kernel function bpf_rcu_read_lock)', err=errno.EINVAL),
    _c("preempt_pair", """
call KFUNC(bpf_preempt_disable)
call KFUNC(bpf_preempt_enable)
r0 = 2
exit""", None),
    _c("preempt_nested", """
call KFUNC(bpf_preempt_disable)
call KFUNC(bpf_preempt_disable)
call KFUNC(bpf_preempt_enable)
call KFUNC(bpf_preempt_enable)
r0 = 2
exit""", None),
    _c("preempt_unmatched", """
call KFUNC(bpf_preempt_enable)
r0 = 2
exit""", "unmatched attempt to enable preemption (kernel function "
       "bpf_preempt_enable)", err=errno.EINVAL),
    _c("preempt_leak", """
call KFUNC(bpf_preempt_disable)
r0 = 2
exit""", _IN_PREEMPT, err=errno.EINVAL),
    _c("preempt_nest_leak", """
call KFUNC(bpf_preempt_disable)
call KFUNC(bpf_preempt_disable)
call KFUNC(bpf_preempt_enable)
r0 = 2
exit""", _IN_PREEMPT, err=errno.EINVAL),
    _c("preempt_helper", """
call KFUNC(bpf_preempt_disable)
r1 = 0
*(u32 *)(r10 -4) = r1
r1 = MAP(arr)
r2 = r10
r2 += -4
call 1
call KFUNC(bpf_preempt_enable)
r0 = 2
exit""", None),
    _c("rcu_in_preempt", """
call KFUNC(bpf_preempt_disable)
call KFUNC(bpf_rcu_read_lock)
call KFUNC(bpf_rcu_read_unlock)
call KFUNC(bpf_preempt_enable)
r0 = 2
exit""", None),
    _c("rcu_cross", """
call KFUNC(bpf_rcu_read_lock)
call KFUNC(bpf_preempt_disable)
call KFUNC(bpf_rcu_read_unlock)
call KFUNC(bpf_preempt_enable)
r0 = 2
exit""", None),
    _c("rcu_branch", """
r6 = *(u32 *)(r1 +0)
if r6 == 0 goto +1
call KFUNC(bpf_rcu_read_lock)
if r6 == 0 goto +1
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", _IN_RCU, err=errno.EINVAL),
    _c("preempt_branch", """
r6 = *(u32 *)(r1 +0)
if r6 == 0 goto +1
call KFUNC(bpf_preempt_disable)
if r6 == 0 goto +1
call KFUNC(bpf_preempt_enable)
r0 = 2
exit""", _IN_PREEMPT, err=errno.EINVAL),
    _c("rcu_tail", """
r6 = r1
call KFUNC(bpf_rcu_read_lock)
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", 'tail_call cannot be used inside bpf_rcu_read_lock-ed region', err=errno.EINVAL),
    _c("preempt_tail", """
r6 = r1
call KFUNC(bpf_preempt_disable)
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
call KFUNC(bpf_preempt_enable)
r0 = 2
exit""", 'tail_call cannot be used inside bpf_preempt_disable-ed region', err=errno.EINVAL),
    _c("rcu_iter", """
call KFUNC(bpf_rcu_read_lock)
r1 = r10
r1 += -8
r2 = 0
r3 = 3
call KFUNC(bpf_iter_num_new)
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", None),
    _c("rcu_ringbuf", """
call KFUNC(bpf_rcu_read_lock)
r1 = MAP(rb)
r2 = 8
r3 = 0
call 131
if r0 == 0 goto +3
r1 = r0
r2 = 0
call 133
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", None),
    _c("rcu_bad_branch", """
r6 = *(u32 *)(r1 +0)
if r6 == 0 goto +1
call KFUNC(bpf_rcu_read_lock)
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", 'unmatched rcu read unlock (kernel function bpf_rcu_read_unlock)', err=errno.EINVAL),
    _c("rcu_half_branch", """
r6 = *(u32 *)(r1 +0)
if r6 == 0 goto +1
call KFUNC(bpf_rcu_read_lock)
if r6 != 0 goto +1
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", _IN_RCU, err=errno.EINVAL),
    _c("preempt_half", """
r6 = *(u32 *)(r1 +0)
if r6 == 0 goto +1
call KFUNC(bpf_preempt_disable)
if r6 != 0 goto +1
call KFUNC(bpf_preempt_enable)
r0 = 2
exit""", _IN_PREEMPT, err=errno.EINVAL),
    _c("rcu_loop", """
call KFUNC(bpf_rcu_read_lock)
r1 = r10
r1 += -8
r2 = 0
r3 = 3
call KFUNC(bpf_iter_num_new)
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
call KFUNC(bpf_rcu_read_unlock)
call KFUNC(bpf_rcu_read_lock)
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
call KFUNC(bpf_rcu_read_unlock)
r0 = 2
exit""", None),
    _c("rcu_spin", """
r1 = 0
*(u32 *)(r10 -4) = r1
r1 = MAP(locked)
r2 = r10
r2 += -4
call 1
if r0 == 0 goto +6
r6 = r0
r1 = r0
r1 += 4
call 93
call KFUNC(bpf_rcu_read_lock)
r1 = r6
r1 += 4
call 94
r0 = 2
exit""", 'function calls are not allowed while holding a lock', err=errno.EINVAL),
    _c("tail_ref", """
r6 = r1
r1 = MAP(rb)
r2 = 8
r3 = 0
call 131
if r0 == 0 goto +6
r7 = r0
r1 = r6
r2 = MAP(progs)
r3 = 0
call 12
r1 = r7
r2 = 0
call 133
r0 = 2
exit""", 'tail_call would lead to reference leak', err=errno.EINVAL),
    _c("iter_pkt_loop", """
r6 = r1
r1 = r10
r1 += -8
r2 = 0
r3 = 16
call KFUNC(bpf_iter_num_new)
r7 = 0
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r1 = *(u32 *)(r0 +0)
if r1 s< 0 goto out
if r1 s>= 16 goto out
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r2 += r1
r4 = r2
r4 += 1
if r4 > r3 goto out
r5 = *(u8 *)(r2 +0)
r7 += r5
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = r7
r0 &= 3
exit""", None),
    _c("iter_index_precise", """
r1 = r10
r1 += -8
r2 = 0
r3 = 100
call KFUNC(bpf_iter_num_new)
r7 = 0
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r2 = 0
*(u32 *)(r10 -16) = r2
r2 = r10
r2 += -16
r1 = MAP(arr)
call 1
if r0 == 0 goto loop
r0 += r7
r1 = *(u8 *)(r0 +0)
r7 += 1
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", 'R0 min value is outside of the allowed memory range'),
    _c("iter_index_bounded", """
r1 = r10
r1 += -8
r2 = 0
r3 = 100
call KFUNC(bpf_iter_num_new)
r7 = 0
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r2 = 0
*(u32 *)(r10 -16) = r2
r2 = r10
r2 += -16
r1 = MAP(arr)
call 1
if r0 == 0 goto loop
if r7 > 15 goto out
r0 += r7
r1 = *(u8 *)(r0 +0)
r7 += 1
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", None),
    _c("iter_sum_break", """
r1 = r10
r1 += -8
r2 = 0
r3 = 100
call KFUNC(bpf_iter_num_new)
r7 = 0
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r1 = *(u32 *)(r0 +0)
r7 += r1
if r7 > 1000 goto out
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", None),
    _c("iter_repeat_counter", """
r1 = r10
r1 += -8
r2 = 0
r3 = 100
call KFUNC(bpf_iter_num_new)
r7 = 0
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r7 += 1
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = r7
exit""", None),
    _c("iter_spilled_sum", """
r1 = r10
r1 += -8
r2 = 0
r3 = 100
call KFUNC(bpf_iter_num_new)
r7 = 0
*(u64 *)(r10 -16) = r7
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r1 = *(u32 *)(r0 +0)
r2 = *(u64 *)(r10 -16)
r2 += r1
*(u64 *)(r10 -16) = r2
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = *(u64 *)(r10 -16)
exit""", None),
    _c("iter_nested", """
r1 = r10
r1 += -8
r2 = 0
r3 = 4
call KFUNC(bpf_iter_num_new)
r7 = 0
outer:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r1 = r10
r1 += -16
r2 = 0
r3 = 4
call KFUNC(bpf_iter_num_new)
inner:
r1 = r10
r1 += -16
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto inner_out
r7 += 1
goto inner
inner_out:
r1 = r10
r1 += -16
call KFUNC(bpf_iter_num_destroy)
goto outer
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", None),
    _c("iter_inner_leak", """
r1 = r10
r1 += -8
r2 = 0
r3 = 4
call KFUNC(bpf_iter_num_new)
outer:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r1 = r10
r1 += -16
r2 = 0
r3 = 4
call KFUNC(bpf_iter_num_new)
goto outer
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", 'BPF_EXIT instruction in main prog would lead to reference leak', err=errno.EINVAL),
    _c("iter_uninit_in_loop", """
r1 = r10
r1 += -8
r2 = 0
r3 = 4
call KFUNC(bpf_iter_num_new)
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r6 = r9
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", 'R9 !read_ok'),
    _c("iter_second_pass_fault", """
r1 = r10
r1 += -8
r2 = 0
r3 = 4
call KFUNC(bpf_iter_num_new)
r7 = 0
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
if r7 != 0 goto bad
r7 = 1
goto loop
bad:
r0 = *(u64 *)(r10 -40)
r7 = 1
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", None),
    _c("mg_basic", """
r0 = 0
loop:
may_goto +2
r0 += 1
goto loop
r0 = 2
exit""", None),
    _c("mg_sum_pkt", """
r6 = r1
r7 = 0
loop:
may_goto out
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
r4 = r2
r4 += 1
if r4 > r3 goto out
r5 = *(u8 *)(r2 +0)
r7 += r5
goto loop
out:
r0 = r7
exit""", None),
    _c("mg_index", """
r7 = 0
loop:
may_goto out
r2 = 0
*(u32 *)(r10 -16) = r2
r2 = r10
r2 += -16
r1 = MAP(arr)
call 1
if r0 == 0 goto out
r0 += r7
r1 = *(u8 *)(r0 +0)
r7 += 1
goto loop
out:
r0 = 2
exit""", 'R0 min value is outside of the allowed memory range'),
    # may_goto outside any loop is a plain branch: its finished states prune as any
    # (NOT_EXACT), not as a loop's (RANGE_WITHIN); Linux 6.18 walks 24 insns
    _c("mg_no_loop", """
r6 = r1
w1 = 0
w2 = 0
w3 = 0
may_goto a
r3 = *(u32 *)(r6 +16)
may_goto a
r2 = *(u32 *)(r6 +16)
w2 += -1
may_goto a
r1 = *(u32 *)(r6 +16)
a:
may_goto b
w3 += w1
may_goto b
w3 += w2
b:
w0 = 2
exit""", None, processed=24),
    # may_goto loops in the main program and in a function it calls: a loop hit hands on
    # what the loop's head state needs precise then, and again when the loop's visit
    # ends (propagate_backedges), not every scalar: the call's second path, a different
    # imprecise w6 in the caller, prunes at the callee's loop; Linux 6.18 walks 30 insns
    _c("mg_loop_then_subprog_loop", """
r8 = r1
r1 = *(u32 *)(r1 +16)
loop:
may_goto +2
w1 += 1
goto loop
w7 = 1
w6 = 1
if w1 s> 0x1 goto +1
w6 = 0
r1 = r8
call sub
if w0 s> 0x1 goto +1
w7 = 0
w6 &= w7
w0 = w6
exit
sub:
r0 = *(u32 *)(r1 +16)
sub_loop:
may_goto +2
w0 += 1
goto sub_loop
exit""", None, processed=30, funcs=(Func("main", True, ("ctx",)), Func("sub", False, ("ctx",)))),
    _c("mg_stack_big", """
r1 = 0
*(u64 *)(r10 -504) = r1
loop:
may_goto out
goto loop
out:
r0 = 2
exit""", None),
    _c("mg_stack_ok", """
r1 = 0
*(u64 *)(r10 -496) = r1
loop:
may_goto out
goto loop
out:
r0 = 2
exit""", None),
    _c("mg_uninit_after", """
loop:
may_goto out
r0 = 1
goto loop
out:
exit""", 'R0 !read_ok'),
    _c("mg_fault_in_loop", """
r1 = 0
loop:
may_goto out
r1 += 1
if r1 > 3 goto bad
goto loop
bad:
r0 = *(u64 *)(r10 +8)
out:
r0 = 2
exit""", 'invalid read from stack R10 off=8 size=8'),
    _c("mg_stack_512", """
r1 = 0
*(u64 *)(r10 -512) = r1
loop:
may_goto out
goto loop
out:
r0 = 2
exit""", None),
    _c("mg_counter_bad", """
r1 = 0
loop:
may_goto out
r1 += 1
if r1 == 300 goto bad
goto loop
bad:
r0 = *(u64 *)(r10 +8)
out:
r0 = 2
exit""", 'invalid read from stack R10 off=8 size=8'),
    _c("mg_counter_unknown_step", """
r6 = r1
r7 = 0
loop:
may_goto out
r2 = *(u32 *)(r6 +0)
r2 &= 7
r7 += r2
if r7 == 5 goto hit
goto loop
hit:
r0 = 1
exit
out:
r0 = 2
exit""", 'R2 bitwise operator &= on pointer prohibited'),
    _c("mg_subprog", """
r1 = 0
call sub
exit
sub:
r0 = 0
loop:
may_goto out
r0 += 1
goto loop
out:
r0 = 2
exit""", None),
    _c("mg_nested", """
r7 = 0
outer:
may_goto out
r8 = 0
inner:
may_goto inner_out
r8 += 1
goto inner
inner_out:
r7 += 1
goto outer
out:
r0 = 2
exit""", None),
    _c("mg_ptr_walk", """
r6 = r1
r2 = *(u32 *)(r6 +0)
r3 = *(u32 *)(r6 +4)
loop:
may_goto out
r4 = r2
r4 += 2
if r4 > r3 goto out
r5 = *(u8 *)(r2 +1)
r2 += r5
goto loop
out:
r0 = 2
exit""", 'R2 offset is outside of the packet'),
    _c("cb_second_iter_fault", """
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = 4
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 181
r0 = 2
exit
cb:
r1 = *(u64 *)(r2 +0)
if r1 == 0 goto first
r0 = *(u64 *)(r10 +8)
first:
r1 = 1
*(u64 *)(r2 +0) = r1
r0 = 0
exit""", 'invalid read from stack R10 off=8 size=8', funcs=_CB),
    _c("cb_once_ok", """
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = 1
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 181
r0 = 2
exit
cb:
r1 = *(u64 *)(r2 +0)
if r1 == 0 goto first
r0 = *(u64 *)(r10 +8)
first:
r1 = 1
*(u64 *)(r2 +0) = r1
r0 = 0
exit""", None, funcs=_CB),
    _c("cb_counter_index", """
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = 20
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 181
r0 = 2
exit
cb:
r6 = r2
r1 = *(u64 *)(r6 +0)
r1 += 1
*(u64 *)(r6 +0) = r1
r1 = r10
r1 += -16
r1 += 0
r0 = 0
exit""", None, funcs=_CB),
    _c("cb_sum", """
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = 100
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 181
r0 = *(u64 *)(r10 -8)
exit
cb:
r3 = *(u64 *)(r2 +0)
r3 += r1
*(u64 *)(r2 +0) = r3
r0 = 0
exit""", None, funcs=_CB),
    _c("cb_index_array", """
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = 100
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 181
r0 = 2
exit
cb:
r6 = r2
r7 = *(u64 *)(r6 +0)
r7 += 1
*(u64 *)(r6 +0) = r7
r2 = 0
*(u32 *)(r10 -8) = r2
r2 = r10
r2 += -8
r1 = MAP(arr)
call 1
if r0 == 0 goto o
r0 += r7
r1 = *(u8 *)(r0 +0)
o:
r0 = 0
exit""", 'R0 min value is outside of the allowed memory range', funcs=_CB),
    _c("cb_unknown_nr", """
r6 = r1
r1 = *(u32 *)(r6 +0)
r7 = *(u32 *)(r6 +4)
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = *(u32 *)(r6 +0)
r1 &= 255
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 181
r0 = 2
exit
cb:
r3 = *(u64 *)(r2 +0)
r3 += 1
*(u64 *)(r2 +0) = r3
r0 = 0
exit""", 'R1 bitwise operator &= on pointer prohibited', funcs=_CB),
    _c("foreach_sum", """
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = MAP(hash)
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 164
r0 = 2
exit
cb:
r5 = *(u64 *)(r3 +0)
r6 = *(u64 *)(r4 +0)
r6 += r5
*(u64 *)(r4 +0) = r6
r0 = 0
exit""", None, funcs=_CB),
    _c("foreach_second_fault", """
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = MAP(hash)
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 164
r0 = 2
exit
cb:
r6 = *(u64 *)(r4 +0)
if r6 == 0 goto first
r0 = *(u64 *)(r10 +8)
first:
r6 = 7
*(u64 *)(r4 +0) = r6
r0 = 0
exit""", 'invalid read from stack R10 off=8 size=8', funcs=_CB),
    _c("cb_ret_two_second", """
r1 = 0
*(u64 *)(r10 -8) = r1
r1 = 4
r2 = subprog[cb]
r3 = r10
r3 += -8
r4 = 0
call 181
r0 = 2
exit
cb:
r0 = *(u64 *)(r2 +0)
r1 = 1
*(u64 *)(r2 +0) = r1
exit""", None, funcs=_CB),
    _c("iter_uninit_start", """
r1 = r10
r1 += -8
r3 = 10
call KFUNC(bpf_iter_num_new)
r0 = 2
exit""", 'R2 is not a scalar', err=errno.EINVAL),
    _c("iter_in_subprog", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r1 = r10
r1 += -8
call sub
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit
sub:
r6 = r1
r7 = 0
loop:
r1 = r6
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r2 = *(u32 *)(r0 +0)
r7 += r2
goto loop
out:
r0 = r7
r0 &= 1
exit""", None, funcs=(Func("main"), Func("sub"))),
    _c("iter_destroy_in_subprog", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r1 = r10
r1 += -8
call sub
r0 = 2
exit
sub:
call KFUNC(bpf_iter_num_destroy)
r0 = 0
exit""", None, funcs=(Func("main"), Func("sub"))),
    _c("iter_pkt_arg", """
r2 = *(u32 *)(r1 +0)
r1 = r2
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r0 = 2
exit""", 'arg#0 expected pointer to an iterator on stack', err=errno.EINVAL),
    _c("iter_scalar_arg", """
r1 = 0
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r0 = 2
exit""", 'Possibly NULL pointer passed to trusted arg0'),
    _c("iter_ptr_start", """
r1 = r10
r1 += -8
r2 = r10
r3 = 10
call KFUNC(bpf_iter_num_new)
r0 = 2
exit""", 'R2 is not a scalar', err=errno.EINVAL),
    _c("iter_16", """
r1 = r10
r1 += -16
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r1 = r10
r1 += -16
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", None),
    _c("iter_next_after_destroy_loop", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
loop:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_next)
if r0 == 0 goto out
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
goto loop
out:
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", 'expected an initialized iter_num as arg #0', err=errno.EINVAL),
    _c("iter_spill_overwrite_ptr", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
*(u64 *)(r10 -8) = r10
r0 = 2
exit""", 'BPF_EXIT instruction in main prog would lead to reference leak', err=errno.EINVAL),
    _c("iter_lookup_key", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r2 = r10
r2 += -8
r1 = MAP(hash)
call 1
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", 'invalid read from stack R2 off -8+0 size 4'),
    _c("iter_next_misaligned", """
r1 = r10
r1 += -8
r2 = 0
r3 = 10
call KFUNC(bpf_iter_num_new)
r1 = r10
r1 += -12
call KFUNC(bpf_iter_num_next)
r1 = r10
r1 += -8
call KFUNC(bpf_iter_num_destroy)
r0 = 2
exit""", "expected an initialized iter_num as arg #0", err=errno.EINVAL),
    # -- bpf_timer in a map value (the value's BTF places it; its callback runs on its own)
    _c("timer_ok", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(timed)
call 1
if r0 == 0 goto out
r6 = r0
r1 = r6
r1 += 8
r2 = MAP(timed)
r3 = 1
call 169
r1 = r6
r1 += 8
r2 = subprog[cb]
call 170
r1 = r6
r1 += 8
r2 = 1000
r3 = 0
call 171
out:
r0 = 2
exit
cb:
r0 = 0
exit""", None, funcs=_CB),
    _c("timer_wrong_off", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(timed)
call 1
if r0 == 0 goto out
r1 = r0
r2 = MAP(timed)
r3 = 1
call 169
out:
r0 = 2
exit""", "off 0 doesn't point to 'struct bpf_timer' that is at 8", err=errno.EINVAL),
    _c("timer_no_btf", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
if r0 == 0 goto out
r1 = r0
r1 += 8
r2 = MAP(arr)
r3 = 1
call 169
out:
r0 = 2
exit""", "map 'arr' has to have BTF in order to use bpf_timer", err=errno.EINVAL),
    _c("timer_no_field", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(locked)
call 1
if r0 == 0 goto out
r1 = r0
r1 += 4
r2 = MAP(locked)
r3 = 1
call 169
out:
r0 = 2
exit""", "map 'locked' has no valid bpf_timer", err=errno.EINVAL),
    _c("timer_other_map", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(timed)
call 1
if r0 == 0 goto out
r1 = r0
r1 += 8
r2 = MAP(arr)
r3 = 1
call 169
out:
r0 = 2
exit""", "timer pointer in R1 map_uid=0 doesn't match map pointer in R2 map_uid=0",
       err=errno.EINVAL),
    _c("timer_stack", """
r1 = r10
r1 += -16
r2 = MAP(timed)
r3 = 1
call 169
r0 = 2
exit""", 'R1 type=fp expected=map_value'),
    _c("timer_var_off", """
r6 = r1
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(timed)
call 1
if r0 == 0 goto out
r2 = *(u32 *)(r6 +12)
r2 &= 8
r1 = r0
r1 += r2
r2 = MAP(timed)
r3 = 1
call 169
out:
r0 = 2
exit""", "R1 doesn't have constant offset. bpf_timer has to be at the constant offset",
       err=errno.EINVAL),
    _c("timer_load", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(timed)
call 1
if r0 == 0 goto out
r1 = *(u64 *)(r0 +8)
out:
r0 = 2
exit""", 'bpf_timer cannot be accessed directly by load/store'),
    _c("timer_store_x", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(timed)
call 1
if r0 == 0 goto out
r1 = 5
*(u64 *)(r0 +0) = r1
out:
r0 = 2
exit""", None),
    _c("timer_cb_ret", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(timed)
call 1
if r0 == 0 goto out
r1 = r0
r1 += 8
r2 = subprog[cb]
call 170
out:
r0 = 2
exit
cb:
r0 = 1
exit""", "At async callback return the register R0 has smin=1 smax=1 should have been in "
       "[0, 0]", funcs=_CB, err=errno.EINVAL),
    _c("timer_cb_reads_value", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(timed)
call 1
if r0 == 0 goto out
r1 = r0
r1 += 8
r2 = subprog[cb]
call 170
out:
r0 = 2
exit
cb:
r0 = *(u64 *)(r3 +0)
r0 = *(u32 *)(r2 +0)
r0 = *(u64 *)(r3 +16)
r0 = 0
exit""", 'bpf_timer cannot be accessed directly by load/store', funcs=_CB),
    _c("timer_cancel_null", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(timed)
call 1
r1 = r0
r1 += 8
call 172
r0 = 2
exit""", None),
    _c("timer_nongpl", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(timed)
call 1
if r0 == 0 goto +3
r1 = r0
r1 += 8
call 172
r0 = 2
exit""", "cannot call GPL-restricted function from non-GPL compatible program",
       license="Dual BSD", err=errno.EINVAL),
    # -- bpf_task_work in a map value: a trusted task, the field at its offset of its own
    # map, the callback an async one (map, key, value)
    _c("tw_ok", _TW_PREP + "\nr1 = r7\nr2 = r6\nr2 += 8\nr3 = MAP(tasked)\n"
       + _TW_CALL.format(k=_TW_SIG), None, funcs=_CB),
    _c("tw_resume_ok", _TW_PREP + "\nr1 = r7\nr2 = r6\nr2 += 8\nr3 = MAP(tasked)\n"
       + _TW_CALL.format(k=_TW_RES), None, funcs=_CB),
    _c("tw_other_map", _TW_PREP + "\nr1 = r7\nr2 = r6\nr2 += 8\nr3 = MAP(htasked)\n"
       + _TW_CALL.format(k=_TW_SIG), _TW_OTHER, funcs=_CB, err=errno.EINVAL),
    _c("tw_map_without_tw", _TW_PREP + "\nr1 = r7\nr2 = r6\nr2 += 8\nr3 = MAP(arr)\n"
       + _TW_CALL.format(k=_TW_SIG), _TW_OTHER, funcs=_CB, err=errno.EINVAL),
    _c("tw_wrong_off", _TW_PREP + "\nr1 = r7\nr2 = r6\nr3 = MAP(tasked)\n"
       + _TW_CALL.format(k=_TW_RES), "off 0 doesn't point to 'struct bpf_task_work' that is at 8",
       funcs=_CB, err=errno.EINVAL),
    _c("tw_stack", _TW_PREP + "\nr1 = r7\nr2 = r10\nr2 += -16\nr3 = MAP(tasked)\n"
       + _TW_CALL.format(k=_TW_RES), "arg#1 doesn't point to a map value", funcs=_CB,
       err=errno.EINVAL),
    _c("tw_no_field", _WQ_LOOKUP + "\nr1 = 1\ncall KFUNC(bpf_task_from_pid)\n"
       "if r0 == 0 goto out\nr7 = r0\nr1 = r7\nr2 = r6\nr2 += 8\nr3 = MAP(queued)\n"
       + _TW_CALL.format(k=_TW_RES), "map 'queued' has no valid bpf_task_work", funcs=_CB,
       err=errno.EINVAL),
    _c("tw_task_maybe_null", _TW_PREP.replace("if r0 == 0 goto out\n", "") +
       "\nr1 = r7\nr2 = r6\nr2 += 8\nr3 = MAP(tasked)\n" + _TW_CALL.format(k=_TW_SIG),
       "Possibly NULL pointer passed to trusted arg0", funcs=_CB),
    _c("tw_task_ctx", _TW_PREP + "\nr1 = r6\nr2 = r6\nr2 += 8\nr3 = MAP(tasked)\n"
       + _TW_CALL.format(k=_TW_SIG), "arg#0 pointer type STRUCT task_struct must point to "
       "scalar, or struct with scalar", funcs=_CB, err=errno.EINVAL),
    _c("tw_no_callback", _TW_PREP + "\nr1 = r7\nr2 = r6\nr2 += 8\nr3 = MAP(tasked)\n"
       + _TW_CALL.format(k=_TW_SIG).replace("r4 = subprog[cb]", "r4 = 0").split("cb:")[0],
       "Possibly NULL pointer passed to trusted arg3"),
    _c("tw_cb_bad_return", _TW_PREP + "\nr1 = r7\nr2 = r6\nr2 += 8\nr3 = MAP(tasked)\n"
       + _TW_CALL.format(k=_TW_SIG).replace("r0 = 0\nexit", "r0 = 3\nexit"), None,
       funcs=_CB),
    # -- bpf_wq in a map value: the kfuncs' arguments and the callback (an async one)
    _c("wq_ok", _WQ_LOOKUP + """
r1 = r6
r1 += 8
r2 = MAP(queued)
r3 = 0
call KFUNC(bpf_wq_init)
r1 = r6
r1 += 8
r2 = subprog[cb]
r3 = 0
r4 = 0
call KFUNC(bpf_wq_set_callback_impl)
r1 = r6
r1 += 8
r2 = 0
call KFUNC(bpf_wq_start)
out:
r0 = 2
exit
cb:
r0 = *(u64 *)(r3 +0)
r0 = *(u32 *)(r2 +0)
r0 = 0
exit""", None, funcs=_CB),
    _c("wq_flags_runtime", _WQ_LOOKUP + """
r1 = r6
r1 += 8
r2 = MAP(queued)
r3 = 7
call KFUNC(bpf_wq_init)
r1 = r6
r1 += 8
r2 = 5
call KFUNC(bpf_wq_start)
out:
r0 = 2
exit""", None),
    _c("wq_wrong_off", _WQ_LOOKUP + """
r1 = r6
r2 = MAP(queued)
r3 = 0
call KFUNC(bpf_wq_init)
out:
r0 = 2
exit""", "off 0 doesn't point to 'struct bpf_wq' that is at 8", err=errno.EINVAL),
    _c("wq_stack", """
r1 = r10
r1 += -16
r2 = MAP(queued)
r3 = 0
call KFUNC(bpf_wq_init)
r0 = 2
exit""", "arg#0 doesn't point to a map value", err=errno.EINVAL),
    _c("wq_null", """
r1 = 0
r2 = MAP(queued)
r3 = 0
call KFUNC(bpf_wq_init)
r0 = 2
exit""", "Possibly NULL pointer passed to trusted arg0"),
    _c("wq_no_field", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(timed)
call 1
if r0 == 0 goto out
r1 = r0
r1 += 8
r2 = MAP(timed)
r3 = 0
call KFUNC(bpf_wq_init)
out:
r0 = 2
exit""", "map 'timed' has no valid bpf_wq", err=errno.EINVAL),
    _c("wq_no_btf", """
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(arr)
call 1
if r0 == 0 goto out
r1 = r0
r1 += 8
call KFUNC(bpf_wq_start)
out:
r0 = 2
exit""", "map 'arr' has to have BTF in order to use bpf_wq", err=errno.EINVAL),
    _c("wq_var_off", """
r6 = r1
r1 = 0
*(u32 *)(r10 -4) = r1
r2 = r10
r2 += -4
r1 = MAP(queued)
call 1
if r0 == 0 goto out
r2 = *(u32 *)(r6 +12)
r2 &= 8
r1 = r0
r1 += r2
r2 = 0
call KFUNC(bpf_wq_start)
out:
r0 = 2
exit""", "R1 doesn't have constant offset. bpf_wq has to be at the constant offset",
       err=errno.EINVAL),
    _c("wq_other_map", _WQ_LOOKUP + """
r1 = r6
r1 += 8
r2 = MAP(hqueued)
r3 = 0
call KFUNC(bpf_wq_init)
out:
r0 = 2
exit""", "workqueue pointer in R1 map_uid=0 doesn't match map pointer in R2 map_uid=0",
       err=errno.EINVAL),
    _c("wq_map_without_wq", _WQ_LOOKUP + """
r1 = r6
r1 += 8
r2 = MAP(arr)
r3 = 0
call KFUNC(bpf_wq_init)
out:
r0 = 2
exit""", "workqueue pointer in R1 map_uid=0 doesn't match map pointer in R2 map_uid=0",
       err=errno.EINVAL),
    _c("wq_map_not_map", _WQ_LOOKUP + """
r1 = r6
r1 += 8
r2 = r10
r2 += -8
r3 = 0
call KFUNC(bpf_wq_init)
out:
r0 = 2
exit""", "pointer in R2 isn't map pointer", err=errno.EINVAL),
    _c("wq_map_value_as_map", _WQ_LOOKUP + """
r1 = r6
r1 += 8
r2 = r6
r3 = 0
call KFUNC(bpf_wq_init)
out:
r0 = 2
exit""", "R2 must be referenced or trusted", err=errno.EINVAL),
    _c("wq_no_callback", _WQ_LOOKUP + """
r1 = r6
r1 += 8
r2 = 0
r3 = 0
r4 = 0
call KFUNC(bpf_wq_set_callback_impl)
out:
r0 = 2
exit""", "Possibly NULL pointer passed to trusted arg1"),
    _c("wq_scalar_callback", _WQ_LOOKUP + """
r1 = r6
r1 += 8
r2 = 8
r3 = 0
r4 = 0
call KFUNC(bpf_wq_set_callback_impl)
out:
r0 = 2
exit""", "arg1 expected pointer to func", err=errno.EINVAL),
    _c("wq_cb_ret", _WQ_LOOKUP + """
r1 = r6
r1 += 8
r2 = subprog[cb]
r3 = 0
r4 = 0
call KFUNC(bpf_wq_set_callback_impl)
out:
r0 = 2
exit
cb:
r0 = 1
exit""", "At async callback return the register R0 has smin=1 smax=1 should have been in "
       "[0, 0]", funcs=_CB, err=errno.EINVAL),
    _c("wq_cb_touches_wq", _WQ_LOOKUP + """
r1 = r6
r1 += 8
r2 = subprog[cb]
r3 = 0
r4 = 0
call KFUNC(bpf_wq_set_callback_impl)
out:
r0 = 2
exit
cb:
r0 = *(u64 *)(r3 +0)
r0 = *(u32 *)(r3 +20)
r0 = 0
exit""", "bpf_wq cannot be accessed directly by load/store", funcs=_CB),
    _c("wq_store", _WQ_LOOKUP + """
r1 = 1
*(u64 *)(r6 +8) = r1
out:
r0 = 2
exit""", "bpf_wq cannot be accessed directly by load/store"),
    *_SOCK_CASES,
    *_XFRM_CASES,
    *_TASK_CASES,
    *_KEY_CASES,
    *_KMEM_CACHE_CASES,
    *_XATTR_CASES,
    *_KERN_CTX_CASES,
    *_IRQ_CASES,
    *_SLEEPABLE_CASES,
    *_THROW_CASES,
    *_MISC_CASES,
    *_CRYPTO_CASES,
    *_SYSCALL_CASES,
    # -- graph kfuncs given NULL: the trusted-argument check comes before the list's own
    *(_c(f"list_null_{k}", f"r1 = 0\nr2 = 0\nr3 = 0\nr4 = 0\ncall KFUNC(bpf_list_{k})\n"
         "r0 = 2\nexit", "Possibly NULL pointer passed to trusted arg0")
      for k in ("push_front_impl", "push_back_impl", "pop_front", "pop_back", "front",
                "back")),
    # -- bpf_probe_read_kernel{,_str}: a destination of the size, any source
    _c("probe_read_ok", "r1 = r10\nr1 += -8\nr2 = 8\nr3 = 0\ncall 113\nr0 = 2\nexit", None),
    _c("probe_read_str_ok", "r1 = r10\nr1 += -8\nr2 = 0\nr3 = 1\ncall 115\nr0 = 2\nexit",
       None),
    _c("probe_read_big", "r1 = r10\nr1 += -8\nr2 = 16\nr3 = 0\ncall 113\nr0 = 2\nexit",
       "invalid write to stack R1 off=-8 size=16", err=errno.EINVAL),
    _c("probe_read_pkt_dst", "r2 = *(u32 *)(r1 +0)\nr3 = *(u32 *)(r1 +4)\nr1 = r2\n"
       "r1 += 8\nif r1 > r3 goto out\nr1 = r2\nr2 = 8\nr3 = 0\ncall 115\nout:\n"
       "r0 = 2\nexit", "helper access to the packet is not allowed"),
    # -- bpf_stream_vprintk_impl(stream_id, fmt__str, args, len__sz, aux__prog): the format
    # a NUL-terminated string in a read-only map at a constant offset, args and len a
    # memory, size pair, both pointers trusted (not NULL)
    _c("stream_ok", _FMT + "r3 = r10\nr3 += -8\nr4 = 8\n" + _VPRINTK, None),
    _c("stream_id_ctx", "r2 = 0\nr3 = 0\nr4 = 0\nr5 = 0\n" + _VPRINTK,
       "R1 is not a scalar", err=errno.EINVAL),
    _c("stream_fmt_stack", "r1 = 0\n*(u64 *)(r10 -8) = r1\nr2 = r10\nr2 += -8\nr1 = 1\n"
       "r3 = 0\nr4 = 0\n" + _VPRINTK, "arg#1 doesn't point to a const string", err=errno.EINVAL),
    _c("stream_fmt_writable", _LOOKUP_OUT.format(m="arr") + "r2 = r0\nr1 = 1\nr3 = 0\nr4 = 0\n"
       + _VPRINTK, "R2 does not point to a readonly map'"),
    _c("stream_fmt_var_off", _LOOKUP_OUT.format(m="fmts") + "r6 = r0\ncall 7\nr0 &= 3\nr2 = r6\n"
       "r2 += r0\nr1 = 1\nr3 = 0\nr4 = 0\n" + _VPRINTK, "R2 is not a constant address'"),
    _c("stream_fmt_no_nul", _LOOKUP_OUT.format(m="fmts") + "r2 = r0\nr2 += 8\nr1 = 1\nr3 = 0\n"
       "r4 = 0\n" + _VPRINTK, "string is not zero-terminated", err=errno.EINVAL),
    _c("stream_args_null", _FMT + "r3 = 0\nr4 = 0\n" + _VPRINTK,
       "Possibly NULL pointer passed to trusted arg2"),
    _c("stream_args_short", _FMT + "r3 = r10\nr3 += -8\nr4 = 16\n" + _VPRINTK,
       "arg#2 arg#3 memory, len pair leads to invalid memory access", err=errno.EINVAL),
    _c("stream_args_scalar", _FMT + "r3 = 46\nr4 = 0\n" + _VPRINTK,
       "arg#2 arg#3 memory, len pair leads to invalid memory access"),
    # -- LD_ABS/LD_IND (an skb's): refused where reached (check_ld_abs), in a subprog by
    # check_btf_func / check_abnormal_return first; tail calls alike
    _c("ld_abs_reached", "r6 = r1\nr0 = *(u16 *)skb[12]\nexit",
       "BPF_LD_[ABS|IND] instructions not allowed for this program type", err=errno.EINVAL),
    _c("ld_ind_dead_branch", "r6 = r1\nr1 = 0\nr0 = 2\nif r0 == 2 goto +1\n"
       "r0 = *(u8 *)skb[r1 + 0]\nexit", None, processed=5),
    _c("ld_abs_void_subprog", "r6 = r1\ncall f\nr0 = 2\nexit\nf:\nr0 = *(u8 *)skb[0]\nexit",
       "LD_ABS is only allowed in functions that return 'int'.", err=errno.EINVAL,
       funcs=(Func("main", True, ("ctx",)), Func("f", ret="void"))),
    _c("tail_call_void_subprog", "call f\nr0 = 2\nexit\nf:\nr2 = MAP(progs)\nr3 = 0\n"
       "call 12\nexit", "tail_call is only allowed in functions that return 'int'.",
       err=errno.EINVAL, funcs=(Func("main", True, ("ctx",)), Func("f", args=("ctx",),
                                                                      ret="void"))),
    _c("ld_abs_subprog_no_btf", "r6 = r1\ncall f\nr0 = 2\nexit\nf:\nr0 = *(u8 *)skb[0]\n"
       "exit", "LD_ABS is not allowed in subprogs without BTF", err=errno.EINVAL),
    # -- check_subprogs and check_reg_arg, in the kernel's words
    _c("jump_past_end", "if r1 == 0 goto +3\nr0 = 2\nexit", "jump out of range from insn 0 to 4",
       err=errno.EINVAL),
    _c("jump_into_other_func", "call f\nif r0 == 0 goto +3\nr0 = 2\nexit\nf:\nr0 = 1\nexit",
       "jump out of range from insn 1 to 5", err=errno.EINVAL),
    _c("subprog_falls_off", "call f\nr0 = 2\nexit\nf:\nr0 = 1",
       "last insn is not an exit or jmp", err=errno.EINVAL),
    _c("read_r12", "r0 = r12\nexit", "R12 is invalid", err=errno.EINVAL),
    # -- resolve_pseudo_ldimm64: a map load no loader bound keeps a raw fd (none here)
    _c("map_fd_unbound", "r1 = map[fd:77777]\nr0 = 2\nexit",
       "fd 77777 is not pointing to valid bpf_map", err=errno.EBADF),
    # -- root (allow_ptr_leaks): neg, bswap and sign-extending moves of a pointer make an
    # unknown scalar rather than a refusal
    _c("neg_pointer_leak", "r2 = r10\nr2 = -r2\nr2 = be64 r2\nr0 = 2\nexit", None,
       processed=5),
    _c("neg_pointer_deref", "r1 = -r1\nr0 = *(u8 *)(r1 +0)\nexit", _SCALAR_MEM),
    _c("movsx_pointer", "r2 = (s32)r10\nw3 = (s8)w1\nr0 = r3\nexit", None, processed=4),
    _c("movsx32_pointer_bounds", "w3 = (s16)w1\nif r3 <= 0xffffffff goto +2\nr1 = 0\n"
       "r0 = *(u64 *)(r1 +0)\nr0 = 2\nexit", None, processed=4),
    # -- check_map_access_type: a write-only map's value is not read, by loads or helpers
    _c("wronly_map_load", _LOOKUP_OUT.format(m="wo") + "r1 = 1\n*(u64 *)(r0 +0) = r1\n"
       "r0 = *(u32 *)(r0 +4)\nout:\nr0 = 2\nexit",
       "read from map forbidden, value_size=8 off=4 size=4"),
    _c("wronly_map_helper_read", _LOOKUP_OUT.format(m="wo") + "r3 = r0\nr1 = MAP(hash)\n"
       "r2 = r10\nr2 += -4\nr4 = 0\ncall 2\nout:\nr0 = 2\nexit",
       "read from map forbidden, value_size=8 off=0 size=8"),
    # -- __reg32_deduce_bounds: u32 [3, U32_MAX] meets s32 [S32_MIN, 1] only below zero
    _c("u32_s32_cross_sign", "call 7\nif w0 < 3 goto +5\nif w0 s> 1 goto +4\n"
       "if w0 s< 0 goto +3\nr1 = 0\nr0 = *(u64 *)(r1 +0)\nr0 = 2\nr0 = 2\nexit", None,
       processed=10),
    _c("u32_s32_cross_sign_high", "call 7\nif w0 > 0x80000003 goto +5\nif w0 s< -3 goto +4\n"
       "if w0 s> 5 goto +3\nif w0 s>= 0 goto +2\nr1 = 0\nr0 = *(u64 *)(r1 +0)\n"
       "r0 = 2\nexit", None, processed=11),
    # -- bpf_strtol/bpf_strtoul: the result a long the helper writes, 8-byte aligned
    *(_c(f"strtol_{name}", "r1 = 0x31\n*(u64 *)(r10 -8) = r1\nr1 = r10\nr1 += -8\nr2 = 8\n"
         f"r3 = 0\nr4 = r10\nr4 += {off}\ncall {fid}\nr0 = *(u64 *)(r10 -24)\nr0 = 2\n"
         "exit", linux, **kw)
      for name, fid, off, linux, kw in (
          ("ok", 105, -24, None, {"processed": 12}),
          ("misaligned", 106, -20, "misaligned stack access off 0+-20+0 size 8", {}),
          ("short", 105, -4, "invalid write to stack R4 off=-4 size=8",
           {"err": errno.EINVAL}))),
    # -- helpers that might sleep (bpf_copy_from_user): never in XDP, a global function
    # calling one neither
    _c("copy_from_user_xdp", "r1 = r10\nr1 += -8\nr2 = 8\nr3 = 0\ncall 148\nr0 = 2\nexit",
       "helper call might sleep in a non-sleepable prog", err=errno.EINVAL),
    _c("global_might_sleep", "r1 = 0\n" + _G1 + "r1 = r10\nr1 += -8\nr2 = 8\nr3 = 0\n"
       "call 148\nr0 = 0\nexit", "a non-sleepable BPF program context", err=errno.EINVAL,
       funcs=_gt("int")),
    # -- bpf_get_current_task_btf: a trusted task_struct pointer, never NULL
    _c("current_task_acquire", "call 158\nr1 = r0\ncall KFUNC(bpf_task_acquire)\n"
       "if r0 == 0 goto out\nr1 = r0\ncall KFUNC(bpf_task_release)\n" + _OUT, None,
       processed=10),
    # a trusted-or-NULL pointer (no reference) passed on to a nullable __arg_trusted
    _c("trusted_nullable_chain", "call 158\nr1 = r0\ncall g1\nr0 = 2\nexit\ng1:\ncall g2\n"
       "r0 = 0\nexit\ng2:\nr0 = 0\nexit", None, processed=10,
       funcs=(Func("main", True, ("ctx",)),
              Func("g1", True, ("struct:task_struct@trusted@nullable",)),
              Func("g2", True, ("struct:task_struct@trusted@nullable",)))),
    # -- check_map_func_compatibility: a stack trace map goes to bpf_get_stackid only
    _c("stack_trace_lookup", _LOOKUP_OUT.format(m="stacks") + _OUT,
       "cannot pass map_type 7 into func bpf_map_lookup_elem#1", err=errno.EINVAL),
    # -- a helper's memory of size zero: any map value pointer will do
    _c("csum_diff_value_size0", _LOOKUP_OUT.format(m="arr") + "r1 = r0\nr1 += 16\nr2 = 0\n"
       "r3 = 0\nr4 = 0\nr5 = 0\ncall 28\n" + _OUT, None, processed=16),
    # -- check_ptr_to_map_access: root reads the map's kernel struct through its pointer
    _c("map_ptr_read", "r1 = MAP(arr)\nr0 = *(u64 *)(r1 +0)\nr1 = MAP(hash)\n"
       "r0 = *(u32 *)(r1 +16)\nr0 = 2\nexit", None, processed=6),
    _c("map_ptr_negative", "r1 = MAP(arr)\nr0 = *(u64 *)(r1 -8)\nr0 = 2\nexit",
       "R1 is bpf_array invalid negative access: off=-8"),
    _c("map_ptr_write", "r1 = MAP(hash)\nr0 = 0\n*(u32 *)(r1 +16) = r0\nr0 = 2\nexit",
       "only read from bpf_htab is supported"),
    # -- an operation that unlinks a scalar drops its link's constant too: r8's compare
    # says nothing of r9 (a copy of r6 after the unlinking xor)
    _c("linked_delta_dropped", "call 7\nr6 = r0\nr6 += 5\nr6 ^= 0\nr8 = r6\nr8 += 3\n"
       "r9 = r6\nif r9 != 10 goto +3\nif r8 == 8 goto +2\nr1 = 0\nr0 = *(u64 *)(r1 +0)\n"
       "r0 = 2\nexit", _SCALAR_MEM),
    # -- coerce_subreg_to_size_sx: w1 = (s8)w0 is an s32 in [-128, 127]
    _c("movsx32_s8_range", "call 7\nw1 = (s8)w0\nif w1 s> 0x7f goto +3\n"
       "if w1 s< -0x80 goto +2\nr0 = 2\nexit\nr1 = 0\nr0 = *(u64 *)(r1 +0)\nexit", None,
       processed=6),
    # -- save_aux_ptr_type: one load or store, one kind of context/socket/kernel pointer
    _c("same_insn_ctx_and_stack", "r6 = r1\nr1 = 0\n*(u64 *)(r10 -8) = r1\ncall 7\nr2 = r10\n"
       "r2 += -8\nif r0 == 0 goto +1\nr2 = r6\nr0 = *(u32 *)(r2 +0)\nr0 = 2\nexit",
       "same insn cannot be used with different pointers", err=errno.EINVAL),
    _c("same_insn_value_and_stack", _LOOKUP_OUT.format(m="arr") + "r6 = r0\ncall 7\n"
       "r2 = r10\nr2 += -8\nif r0 == 0 goto +1\nr2 = r6\n*(u32 *)(r2 +0) = r0\n" + _OUT,
       None, processed=19),
    # -- check_stack_read_fixed_off: bytes of a spilled zero read back as zero
    _c("spilled_zero_bytes", "*(u64 *)(r10 -8) = 0\nr0 = *(u8 *)(r10 -1)\nr1 = *(u16 *)(r10 -4)\n"
       "r0 |= r1\nif r0 == 0 goto +2\nr1 = 0\nr0 = *(u64 *)(r1 +0)\nr0 = 2\nexit", None,
       processed=7),
    # -- recursion: walked as deep as it goes; the static call graph then never ends
    # (check_max_stack_depth gives up at 8 frames)
    _c("recursion_bounded", "r1 = 2\ncall f\nr0 = 2\nexit\nf:\nr1 -= 1\nif r1 == 0 goto +1\n"
       "call f\nr0 = 0\nexit", "the call stack of 8 frames is too deep !", err=errno.E2BIG),
    _c("recursion_unbounded", "call f\nr0 = 2\nexit\nf:\ncall g\nexit\ng:\ncall f\nr0 = 0\n"
       "exit", "the call stack of 9 frames is too deep", err=errno.E2BIG),
    # -- tracing helpers of the base set: the current task's name, user memory reads
    _c("current_comm_and_probe_user", "r1 = r10\nr1 += -16\nr2 = 16\ncall 16\nr1 = r10\n"
       "r1 += -8\nr2 = 8\nr3 = 0\ncall 112\nr0 = *(u64 *)(r10 -8)\nr0 = 2\nexit", None,
       processed=12),
    _c("current_comm_too_long", "r1 = r10\nr1 += -16\nr2 = 17\ncall 16\nr0 = 2\nexit",
       "invalid write to stack R1 off=-16 size=17", err=errno.EINVAL),
    # -- bpf_skc_to_tcp_sock: the socket as a tcp_sock or NULL, sharing its reference:
    # released through the cast, or gone with the socket
    _c("skc_to_tcp_sock_release_cast", _SK_TUPLE + "call 84\nif r0 == 0 goto +9\nr6 = r0\n"
       "r1 = r0\ncall 137\nif r0 != 0 goto +3\nr1 = r6\ncall 86\ngoto +2\nr1 = r0\n"
       "call 86\nr0 = 2\nexit", None, processed=24),
    _c("skc_to_tcp_sock_after_release", _SK_TUPLE + "call 84\nif r0 == 0 goto +9\nr6 = r0\n"
       "r1 = r0\ncall 137\nr7 = r0\nr1 = r6\ncall 86\nif r7 == 0 goto +1\n"
       "r0 = *(u32 *)(r7 +0)\nr0 = 2\nexit", "R7 invalid mem access 'scalar'"),
    # -- a tail call in a subprog: the path where it returns to the caller (with the tail
    # called program's R0, packet pointers gone) is walked, then the failed call's
    *(_c(name, _PKT64 + "call sub\nr0 = 0\nr0 = *(u8 *)(r6 +0)\nout:\nr0 = 2\nexit\nsub:\n"
         "r2 = MAP(progs)\nr3 = 0\ncall 12\nr0 = 1\nexit", _SCALAR_MEM.replace("R1", "R6"),
         funcs=(Func("main", True, ("ctx",)), Func("sub", g, ("ctx",))))
      for name, g in (("tail_call_subprog_pkt", False), ("tail_call_global_pkt", True))),
    # a tail call that succeeds leaves the subprogram: the caller's slot the callee
    # writes after it may still hold what the caller put there
    _c("tail_call_subprog_skips_write", """
r6 = r1
r1 = -8
*(u64 *)(r10 -8) = r1
call 7
if r0 != 42 goto one
goto two
one:
r1 = -1024
*(u64 *)(r10 -8) = r1
two:
r1 = r6
r2 = r10
r2 += -8
call sub
r1 = *(u64 *)(r10 -8)
r2 = r10
r2 += r1
r0 = *(u64 *)(r2 +0)
r0 = 2
exit
sub:
r6 = r2
r2 = MAP(progs)
r3 = 0
call 12
r1 = -16
*(u64 *)(r6 +0) = r1
r0 = 0
exit""", "invalid read from stack R2 off=-1024 size=8",
       funcs=(Func("main", True, ("ctx",)), Func("sub", False, ("ctx", "void*")))),
    # a callee reads its caller's slot: the slot is live at the callee's entry once the
    # callee returned (the liveness is brought up to date before its frame goes), so
    # the second path's different spill there is not pruned; Linux 6.18 walks 23 insns
    _c("live_stack_callee_reads_caller", """
call 7
if r0 == 42 goto one
r0 = MAP(hash)
one:
*(u64 *)(r10 -8) = r0
r1 = r10
r1 += -8
call sub
r0 = 2
exit
sub:
r0 = *(u64 *)(r1 +0)
r0 = 0
goto +0
exit""", None, processed=23),
    _c("tail_call_subprog_returns", "call sub\nr0 = 0\nr0 = 0\nr0 = 0\nexit\nsub:\n"
       "r2 = MAP(progs)\nr3 = 0\ncall 12\nr0 = 1\nexit", None, processed=14,
       funcs=(Func("main", True, ("ctx",)), Func("sub", False, ("ctx",)))),
    # -- bpf_find_vma(task, addr, cb, ctx, flags): cb(task, vma, ctx) returns 0 or 1;
    # bpf_user_ringbuf_drain(map, cb, ctx, flags): cb(dynptr, ctx)
    *(_c(name, pre + "r2 = 0\nr3 = subprog[cb]\nr4 = 0\nr5 = 0\ncall 180\nr0 = 2\nexit\n"
         f"cb:\nr0 = {ret}\nexit", linux, funcs=_CB, **kw)
      for name, pre, ret, linux, kw in (
          ("find_vma_current", "call 158\nr1 = r0\n", 1, None, {"processed": 12}),
          ("find_vma_ctx", "", 0, "R1 type=ctx expected=ptr_, trusted_ptr_, rcu_ptr_", {}),
          ("find_vma_cb_ret2", "call 158\nr1 = r0\n", 2,
           "At callback return the register R0 has smin=2 smax=2 should have been in [0, 1]",
           {"err": errno.EINVAL}))),
    _c("user_ringbuf_drain", "r1 = MAP(urb)\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\ncall 209\n"
       "r0 = 2\nexit\ncb:\nr0 = 0\nexit", None, funcs=_CB, processed=10),
    _c("user_ringbuf_drain_ringbuf", "r1 = MAP(rb)\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\n"
       "call 209\nr0 = 2\nexit\ncb:\nr0 = 0\nexit",
       "cannot pass map_type 27 into func bpf_user_ringbuf_drain#209", funcs=_CB,
       err=errno.EINVAL),
    # -- bpf_fastcall: the spill/fill pair around an inlined bpf_get_smp_processor_id goes,
    # and its stack with it, unless something else touches that slot or the call is not
    # inlined (bpf_get_prandom_u32)
    *(_c(name, "r1 = 1\n*(u64 *)(r10 -512) = r1\ncall f\nr0 = 2\nexit\nf:\n"
         f"*(u64 *)(r10 -8) = r1\ncall {fid}\nr1 = *(u64 *)(r10 -8)\n{more}r0 = 0\nexit",
         linux, **kw)
      for name, fid, more, linux, kw in (
          ("fastcall_stack_dropped", 8, "", None, {"processed": 10}),
          ("fastcall_stack_touched", 8, "r2 = *(u64 *)(r10 -8)\n",
           "combined stack size of 2 calls is 528. Too large", {}),
          ("fastcall_not_inlined", 7, "", "combined stack size of 2 calls is 528. Too large",
           {}))),
    # -- kfuncs of other program types: refused at the call, before their arguments
    *(_c(f"kfunc_not_for_xdp_{k}", f"r1 = 0\nr2 = 0\nr3 = 0\ncall KFUNC({k})\n"
         "r0 = 2\nexit", f"calling kernel function {k} is not allowed")
      for k in ("bpf_dynptr_from_skb", "bpf_cpumask_create", "tcp_slow_start",
                "bpf_sock_destroy", "bpf_crypto_ctx_create", "bpf_crypto_ctx_acquire",
                "bpf_crypto_ctx_release", "bpf_session_cookie",
                "bpf_verify_pkcs7_signature")),
    # -- __kptr_untrusted (BPF_KPTR_UNREF) and __kptr fields to a kernel struct: a map
    # value's pointers (check_map_access, check_map_kptr_access, map_kptr_match_type)
    _c("kptr_unref_size", _KPTRS + "*(u32 *)(r0 +8) = 0\n" + _OUT,
       "kptr access size must be BPF_DW"),
    _c("kptr_unref_misaligned", _KPTRS + "r1 = *(u64 *)(r0 +7)\n" + _OUT,
       "kptr access misaligned expected=8 off=7"),
    _c("kptr_unref_st_imm", _KPTRS + "*(u64 *)(r0 +8) = 1\n" + _OUT,
       "BPF_ST imm must be 0 when storing to kptr at off=8"),
    _c("kptr_unref_st_zero", _KPTRS + "*(u64 *)(r0 +8) = 0\n" + _OUT, None, processed=10),
    _c("kptr_unref_load_null", _KPTRS + "r1 = *(u64 *)(r0 +8)\nr0 = *(u32 *)(r1 +4)\n" + _OUT,
       "R1 invalid mem access 'untrusted_ptr_or_null_'"),
    _c("kptr_unref_load_walk", _KPTRS + "r1 = *(u64 *)(r0 +8)\nif r1 == 0 goto out\n"
       "r2 = *(u64 *)(r1 +16)\nif r2 == 0 goto out\nr0 = *(u32 *)(r2 +4)\n" + _OUT, None,
       processed=18),
    _c("kptr_unref_store_back", _KPTRS + "r1 = *(u64 *)(r0 +8)\nif r1 == 0 goto out\n"
       "*(u64 *)(r0 +8) = r1\n" + _OUT, None, processed=14),
    _c("kptr_unref_store_off", _KPTRS + "r1 = *(u64 *)(r0 +8)\nif r1 == 0 goto out\n"
       "r1 += 4\n*(u64 *)(r0 +8) = r1\n" + _OUT, _BAD_UNREF.format(r=1, t=_UNTRUSTED_REF)),
    # (its member at 8 is a struct prog_test_member, not the field's struct)
    _c("kptr_unref_store_member", _KPTRS + "r1 = *(u64 *)(r0 +8)\nif r1 == 0 goto out\n"
       "r1 += 8\n*(u64 *)(r0 +8) = r1\n" + _OUT, _BAD_UNREF.format(r=1, t=_UNTRUSTED_REF)),
    _c("kptr_unref_store_var", _KPTRS + "r1 = *(u64 *)(r0 +8)\nif r1 == 0 goto out\n"
       "r2 = *(u32 *)(r0 +0)\nr2 &= 32\nr1 += r2\n*(u64 *)(r0 +8) = r1\n" + _OUT,
       "variable untrusted_ptr_ access var_off=(0x0; 0x20) disallowed"),
    _c("kptr_unref_store_scalar", _KPTRS + "r1 = 5\n*(u64 *)(r0 +8) = r1\n" + _OUT,
       _BAD_UNREF.format(r=1, t="scalar")),
    _c("kptr_unref_store_value", _KPTRS + "*(u64 *)(r0 +8) = r0\n" + _OUT,
       _BAD_UNREF.format(r=0, t="map_value")),
    _c("kptr_unref_helper", _KPTRS + "r1 = r0\nr2 = 16\ncall 16\n" + _OUT,
       "kptr cannot be accessed indirectly by helper"),
    _c("kptr_unref_xchg", _KPTRS + "r1 = r0\nr1 += 8\nr2 = 0\ncall 194\n" + _OUT,
       "off=8 kptr isn't referenced kptr"),
    _c("kptr_ref_kernel_load", _KPTRS + "r1 = *(u64 *)(r0 +16)\ncall 154\n" + _OUT,
       "R1 type=rcu_ptr_or_null_ expected=percpu_ptr_, percpu_rcu_ptr_, percpu_trusted_ptr_"),
    _c("kptr_ref_kernel_read", _KPTRS + "r1 = *(u64 *)(r0 +16)\nif r1 == 0 goto out\n"
       "r0 = *(u32 *)(r1 +4)\n" + _OUT, None, processed=14),
    _c("kptr_ref_kernel_store", _KPTRS + "r1 = *(u64 *)(r0 +16)\nif r1 == 0 goto out\n"
       "*(u64 *)(r0 +16) = r1\n" + _OUT, "store to referenced kptr disallowed"),
    _c("kptr_ref_kernel_xchg", _KPTRS + "r1 = *(u64 *)(r0 +16)\nif r1 == 0 goto out\n"
       "r2 = r1\nr1 = r0\nr1 += 16\ncall 194\n" + _OUT,
       "R2 must be referenced when passed to release function", err=errno.EINVAL),
    # -- Linux walks the program before it measures its call chains
    _c("call_too_deep_after_refusal", "r0 = *(u64 *)(r2 +0)\n" + "call pc+1\nexit\n" * 8
       + "r0 = 0\nexit", "R2 !read_ok"),
    _c("global_call_chain_too_deep", "call g1\nr0 = 0\nexit\n" + "".join(
        f"g{n}:\ncall g{n + 1}\nr0 = 0\nexit\n" for n in range(1, 8)) + "g8:\nr0 = 0\nexit",
       "the call stack of 8 frames is too deep !", err=errno.E2BIG,
       funcs=(Func("main", True, ("ctx",)), *(Func(f"g{n}", True) for n in range(1, 9)))),
    # -- a helper writing to the stack (raw mode) may not touch a dynptr's slots, whether
    # the dynptr holds a reference or not (check_stack_range_initialized)
    _c("dynptr_helper_write_ringbuf", _RBD + "r1 = r10\nr1 += -32\nr2 = 32\ncall 16\n"
       + _RBD_EXIT, "potential write to dynptr at off=-16 disallowed"),
    _c("dynptr_helper_write_local", _FROM_MEM + "r1 = r10\nr1 += -24\nr2 = 8\ncall 16\n"
       + _OUT, "potential write to dynptr at off=-24 disallowed"),
    # a callback's dynptr (CONST_PTR_TO_DYNPTR) is no uninitialized one for a helper
    _c("user_ringbuf_cb_dynptr_reinit", "r1 = MAP(urb)\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\n"
       "call 209\nr0 = 2\nexit\ncb:\nr4 = r1\nr1 = r10\nr1 += -8\nr2 = 8\nr3 = 0\n"
       "call 197\nr0 = 0\nexit", "Dynptr has to be an uninitialized dynptr", funcs=_CB,
       err=errno.EINVAL),
    # a callback is a function Linux numbers too (func#): the global function after it is #2
    _c("global_func_number_after_callback", "r1 = 1\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\n"
       "call 181\nr0 = 2\nexit\ncb:\nr1 = 5\ncall g1\nr0 = 0\nexit\ng1:\nr0 = 0\n"
       "exit", "Caller passes invalid args into func#2 ('g1')", err=errno.EINVAL,
       funcs=(Func("main", True, ("ctx",)), Func("cb", False, ("int", "void*")),
              Func("g1", True, ("ctx",)))),
    # -- memory an iterator gives is its own: gone when it is destroyed (a task is not)
    _c("iter_num_elem_after_destroy", _IT16 + "r2 = 0\nr3 = 5\ncall KFUNC(bpf_iter_num_new)\n"
       + _IT16 + "call KFUNC(bpf_iter_num_next)\nr6 = r0\n" + _IT16 +
       "call KFUNC(bpf_iter_num_destroy)\nif r6 == 0 goto +1\nr0 = *(u32 *)(r6 +0)\nr0 = 2\n"
       "exit", "R6 invalid mem access 'scalar'"),
    _c("iter_num_elem_before_destroy", _IT16 + "r2 = 0\nr3 = 5\ncall KFUNC(bpf_iter_num_new)\n"
       + _IT16 + "call KFUNC(bpf_iter_num_next)\nr6 = r0\nif r6 == 0 goto +1\n"
       "r0 = *(u32 *)(r6 +0)\n" + _IT16 + "call KFUNC(bpf_iter_num_destroy)\nr0 = 2\nexit",
       None, processed=23),
    _c("iter_task_elem_after_destroy", _IT_NEW + _IT + "call KFUNC(bpf_iter_task_next)\n"
       "r6 = r0\n" + _IT + "call KFUNC(bpf_iter_task_destroy)\nif r6 == 0 goto +1\n"
       "r0 = *(u32 *)(r6 +0)\nr0 = 2\nexit", None, processed=25),
    # an iterator's _next and _destroy read its slots: a state kept in the loop with it
    # drained is no match for one with it active (as clang lays out a counted bpf_for)
    _c("iter_loop_slots_live", _IT8 + "w6 = 0\nw2 = 0\nw3 = 2\ncall KFUNC(bpf_iter_num_new)\n"
       "goto l1\nl3:\nw3 = w6\ncall 7\nw6 += 1\nif w6 != 3 goto l1\n" + _IT8 +
       "call KFUNC(bpf_iter_num_destroy)\nw0 = 0\nexit\nl1:\n" + _IT8 +
       "call KFUNC(bpf_iter_num_next)\nw4 = -1\nif r0 == 0 goto l3\nr4 = *(u32 *)(r0 +0)\n"
       "goto l3", None, processed=92),
    # -- untrusted memory (bpf_rdonly_cast to void) is read by probe loads: its pointer
    # arithmetic tracks no offset, so no bound or operator is refused but 32-bit ones
    _c("untrusted_mem_unbounded_add", "call 7\nr6 = r0\n" + _UMEM + "r0 += r6\nr0 -= r6\n"
       "r0 = *(u8 *)(r0 +0)\nr0 = 2\nexit", None, processed=10),
    _c("untrusted_mem_commuted_add", _UMEM + "r1 = 5\nr1 += r0\nr0 = *(u8 *)(r1 +0)\nr0 = 2\n"
       "exit", None, processed=8),
    _c("untrusted_mem_and", _UMEM + "r0 &= 4\nr0 = *(u64 *)(r0 +0)\nr0 = 2\nexit", None,
       processed=7),
    _c("untrusted_mem_32bit_add", _UMEM + "w0 += 4\nr0 = 2\nexit",
       "R0 32-bit pointer arithmetic prohibited"),
    # one load of kernel memory and of a kernel object (save_aux_ptr_type merges them)
    _c("untrusted_mem_and_kern_ctx_load", "r6 = r1\ncall 7\nif r0 == 0 goto a\nr1 = r6\n"
       "call KFUNC(bpf_cast_to_kern_ctx)\ngoto b\na:\n" + _UMEM + "b:\n"
       "r0 = *(u64 *)(r0 +0)\nr0 = 2\nexit", None, processed=15),
    # a global function is called with preemption disabled as anywhere else
    _c("preempt_global_call", "call KFUNC(bpf_preempt_disable)\nr1 = 0\ncall g1\n"
       "call KFUNC(bpf_preempt_enable)\nr0 = 2\nexit\ng1:\nr0 = 0\nexit", None, processed=8,
       funcs=_gt("int")),
    # -- a 32-bit move takes the subregister's bounds (zext_32_to_64): a JMP32 compare's
    # "w0 != 0" makes w1 = w0 non-zero, so the dereference of the scalar is dead code
    _c("mov32_keeps_jmp32_bound", "call 7\nif w0 != 0 goto l1\nr0 = 2\nexit\nl1:\nw1 = w0\n"
       "if w1 == 0 goto l2\nr0 = 2\nexit\nl2:\nr0 = *(u64 *)(r0 +0)\nr0 = 2\nexit", None,
       processed=8),
    # -- a bloom filter's bpf_map_peek_elem reads the value it tests (resolve_map_arg_type):
    # the stack keeps its spills, a pointer's included
    _c("bloom_peek_keeps_spills", "r6 = r1\nr1 = 5\n*(u64 *)(r10 -8) = r1\n"
       "*(u64 *)(r10 -16) = r6\nr1 = MAP(bloom)\nr2 = r10\nr2 += -16\ncall 89\n"
       "r1 = *(u64 *)(r10 -8)\nif r1 == 5 goto +1\nr0 = *(u64 *)(r1 +0)\n"
       "r1 = *(u64 *)(r10 -16)\nr0 = *(u32 *)(r1 +0)\nr0 = 2\nexit", None, processed=14),
    # ... so a 32-bit spill stays one: no match for a state's spilled 0 at the join (a
    # misc slot would be: the walk stops there)
    _c("bloom_peek_partial_spill_no_prune", "call 7\nr6 = r0\nr7 = 0\nif r6 > 10 goto a\n"
       "r1 = 0\n*(u64 *)(r10 -8) = r1\nif r6 > 3 goto +1\nr7 = 1\nif r6 > 5 goto +1\n"
       "r7 = 2\nr7 = 3\nr8 = 0\nr8 = 1\nr8 = 2\nr8 = 3\nr8 = 4\ngoto j\na:\n"
       "*(u32 *)(r10 -8) = r6\nr1 = MAP(bloom)\nr2 = r10\nr2 += -8\ncall 89\nr7 = 3\nj:\n"
       "r1 = *(u64 *)(r10 -8)\nr1 += 1\nr1 += 1\nr1 += 1\nr1 += 1\nr0 = 2\nexit", None,
       processed=48),
    # -- one state too many for the jump stack: 6.18's push_stack fails and its caller picks
    # the errno (EFAULT at a conditional jump, ENOMEM at may_goto, EFAULT and a line of its
    # own for an async callback)
    _c("jmp_seq_cond_jump", _JMP_SEQ + "if r8 > 5 goto +1\nr7 = 1\nr0 = 2\nexit", _JMP_SEQ_LINE,
       err=errno.EFAULT),
    _c("jmp_seq_may_goto", _JMP_SEQ + "may_goto +1\nr0 = 1\nr0 = 2\nexit", _JMP_SEQ_LINE,
       err=errno.ENOMEM),
    _c("jmp_seq_async_cb", _JMP_SEQ + "r1 = 0\n*(u32 *)(r10 -4) = r1\nr2 = r10\nr2 += -4\n"
       "r1 = MAP(timed)\ncall 1\nif r0 == 0 goto out\nr6 = r0\nr1 = r6\nr1 += 8\n"
       "r2 = MAP(timed)\nr3 = 1\ncall 169\nr1 = r6\nr1 += 8\nr2 = subprog[cb]\ncall 170\n"
       "out:\nr0 = 2\nexit\ncb:\nr0 = 0\nexit",
       "The sequence of 8193 jumps is too complex for async cb.", err=errno.EFAULT, funcs=_CB),
    # -- refused programs of the kinds XDP developers write (stale packet pointers after
    # adjust_head, unchecked or wrongly checked bounds, map values unchecked or indexed
    # without bounds, bad helper arguments, ctx misuse, leaked references, stack misuse):
    # Linux's last line and errno
    _c("msg_adjust_head_reload_unchecked", "r6 = r1\nr7 = *(u32 *)(r6 +0)\n"
       "r8 = *(u32 *)(r6 +4)\nr1 = r6\nr2 = -14\ncall 44\nr7 = *(u32 *)(r6 +0)\n"
       "r0 = *(u8 *)(r7 +0)\nr0 = 2\nexit",
       "R7 offset is outside of the packet"),
    _c("msg_adjust_head_check_stale_end", "r6 = r1\nr7 = *(u32 *)(r6 +0)\n"
       "r8 = *(u32 *)(r6 +4)\nr1 = r6\nr2 = -14\ncall 44\nr7 = *(u32 *)(r6 +0)\nr0 = r7\n"
       "r0 += 14\nif r0 > r8 goto out\nr0 = *(u8 *)(r7 +0)\nout:\nr0 = 2\nexit",
       "R7 offset is outside of the packet"),
    _c("msg_map_value_unbounded_idx", "r1 = 0\n*(u32 *)(r10 -4) = r1\nr2 = r10\nr2 += -4\n"
       "r1 = MAP(hash)\ncall 1\nif r0 == 0 goto out\nr6 = r0\ncall 7\nr6 += r0\n"
       "r1 = *(u8 *)(r6 +0)\nout:\nr0 = 2\nexit",
       "math between map_value pointer and register with unbounded min value is not "
       "allowed", err=errno.EINVAL),
    _c("msg_map_value_idx_off_by_one", "r1 = 0\n*(u32 *)(r10 -4) = r1\nr2 = r10\nr2 += -4\n"
       "r1 = MAP(hash)\ncall 1\nif r0 == 0 goto out\nr6 = r0\ncall 7\nif r0 > 8 goto out\n"
       "r6 += r0\nr1 = *(u8 *)(r6 +0)\nout:\nr0 = 2\nexit",
       "R6 max value is outside of the allowed memory range"),
    _c("msg_stack_oob_write", "r1 = 0\n*(u64 *)(r10 -520) = r1\nr0 = 2\nexit",
       "invalid write to stack R10 off=-520 size=8"),
    _c("msg_stack_above_fp", "r1 = 0\n*(u64 *)(r10 +8) = r1\nr0 = 2\nexit",
       "invalid write to stack R10 off=8 size=8"),
    _c("msg_helper_value_ctx", "r3 = r1\nr1 = 0\n*(u32 *)(r10 -4) = r1\nr2 = r10\nr2 += -4\n"
       "r1 = MAP(hash)\nr4 = 0\ncall 2\nr0 = 2\nexit",
       "R3 type=ctx expected=fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, "
       "trusted_ptr_"),
    _c("msg_ctx_read_oob", "r0 = *(u32 *)(r1 +64)\nr0 = 2\nexit",
       "invalid bpf_context access off=64 size=4"),
    _c("msg_pkt_end_arith", "r6 = r1\nr7 = *(u32 *)(r6 +0)\nr8 = *(u32 *)(r6 +4)\nr8 += 1\n"
       "r0 = 2\nexit",
       "R8 pointer arithmetic on pkt_end prohibited"),
    _c("msg_pkt_read_past_check", "r6 = r1\nr7 = *(u32 *)(r6 +0)\nr8 = *(u32 *)(r6 +4)\n"
       "r0 = r7\nr0 += 14\nif r0 > r8 goto out\nr0 = *(u8 *)(r7 +14)\nout:\nr0 = 2\nexit",
       "R7 offset is outside of the packet"),
    _c("msg_pkt_no_check", "r6 = r1\nr7 = *(u32 *)(r6 +0)\nr8 = *(u32 *)(r6 +4)\n"
       "r0 = *(u8 *)(r7 +0)\nr0 = 2\nexit",
       "R7 offset is outside of the packet"),
    _c("msg_pkt_check_wrong_way", "r6 = r1\nr7 = *(u32 *)(r6 +0)\nr8 = *(u32 *)(r6 +4)\n"
       "r0 = r7\nr0 += 14\nif r0 < r8 goto out\nr0 = *(u8 *)(r7 +0)\nout:\nr0 = 2\nexit",
       "R7 offset is outside of the packet"),
    _c("msg_pkt_var_off_unbounded", "r6 = r1\nr7 = *(u32 *)(r6 +0)\nr8 = *(u32 *)(r6 +4)\n"
       "r0 = r7\nr0 += 14\nif r0 > r8 goto out\nr1 = *(u8 *)(r7 +0)\nr7 += r1\n"
       "r0 = *(u8 *)(r7 +0)\nout:\nr0 = 2\nexit",
       "R7 offset is outside of the packet"),
    _c("msg_ringbuf_null_submit", "r1 = MAP(rb)\nr2 = 8\nr3 = 0\ncall 131\nr1 = r0\nr2 = 0\n"
       "call 132\nr0 = 2\nexit",
       "R1 type=ringbuf_mem_or_null expected=ringbuf_mem"),
    _c("msg_jump_out_of_range", "r0 = 2\ngoto +100\nexit",
       "jump out of range from insn 1 to 102", err=errno.EINVAL),
    _c("msg_unknown_helper", "call 9999\nr0 = 2\nexit",
       "invalid func unknown#9999", err=errno.EINVAL),
    _c("msg_read_uninit_reg", "r0 = r5\nexit",
       "R5 !read_ok"),
    _c("msg_combined_stack_too_large", "r1 = 0\n*(u64 *)(r10 -256) = r1\ncall f\nr0 = 2\n"
       "exit\nf:\nr1 = 0\n*(u64 *)(r10 -304) = r1\nr0 = 0\nexit",
       "combined stack size of 2 calls is 560. Too large"),
    _c("msg_stack_var_read_unbounded", "call 7\nr1 = r10\nr1 += -8\nr1 += r0\n"
       "r0 = *(u8 *)(r1 +0)\nr0 = 2\nexit",
       "math between fp pointer and register with unbounded min value is not "
       "allowed", err=errno.EINVAL),
    _c("msg_csum_diff_negative_size", "call 7\nr2 = r0\nr1 = r10\nr1 += -8\nr3 = 0\nr4 = 0\n"
       "r5 = 0\ncall 28\nr0 = 2\nexit",
       "R2 min value is negative, either use unsigned or 'var &= const'"),
    _c("msg_div_by_pointer", "r0 = 2\nr0 /= r10\nexit",
       "R0 pointer arithmetic with /= operator prohibited"),
    _c("msg_atomic_on_packet", "r6 = r1\nr7 = *(u32 *)(r6 +0)\nr8 = *(u32 *)(r6 +4)\nr0 = r7\n"
       "r0 += 14\nif r0 > r8 goto out\nr1 = 1\nlock *(u32 *)(r7 +0) += r1\nout:\nr0 = 2\nexit",
       "BPF_ATOMIC stores into R7 pkt is not allowed"),
    _c("msg_ptr_arith_32", "r1 = r10\nw1 += -8\nr0 = 2\nexit",
       "R1 32-bit pointer arithmetic prohibited"),
    _c("msg_return_stack_ptr_to_caller", "call f\nr0 = 2\nexit\nf:\nr0 = r10\nr0 += -8\nexit",
       "cannot return stack pointer to the caller", err=errno.EINVAL),
    _c("msg_pkt_ptr_negative_off", "r6 = r1\nr7 = *(u32 *)(r6 +0)\nr8 = *(u32 *)(r6 +4)\n"
       "r0 = r7\nr0 += 14\nif r0 > r8 goto out\nr7 += -2\nr0 = *(u8 *)(r7 +0)\nout:\nr0 = 2\n"
       "exit",
       "R7 offset is outside of the packet"),
    _c("msg_pkt_meta_past_data", "r6 = r1\nr7 = *(u32 *)(r6 +8)\nr8 = *(u32 *)(r6 +0)\n"
       "r0 = r7\nr0 += 4\nif r0 > r8 goto out\nr0 = *(u32 *)(r7 +4)\nout:\nr0 = 2\nexit",
       "R7 offset is outside of the packet"),
    _c("msg_ctx_narrow_data", "r0 = *(u16 *)(r1 +0)\nr0 = 2\nexit",
       "invalid bpf_context access off=0 size=2"),
    _c("msg_ctx_read_off_misaligned", "r0 = *(u32 *)(r1 +2)\nr0 = 2\nexit",
       "invalid bpf_context access off=2 size=4"),
    _c("msg_load_bytes_unbounded_len", "r6 = r1\ncall 7\nr4 = r0\nr1 = r6\nr2 = 0\nr3 = r10\n"
       "r3 += -8\ncall 189\nr0 = 2\nexit",
       "R4 min value is negative, either use unsigned or 'var &= const'"),
    _c("msg_ringbuf_output_unbounded", "call 7\nr3 = r0\nr1 = MAP(rb)\nr2 = r10\nr2 += -8\n"
       "r4 = 0\ncall 130\nr0 = 2\nexit",
       "R3 min value is negative, either use unsigned or 'var &= const'"),
    _c("msg_two_pkt_ptrs_add", "r6 = r1\nr7 = *(u32 *)(r6 +0)\nr8 = *(u32 *)(r6 +4)\n"
       "r7 += r8\nr0 = 2\nexit",
       "R7 pointer += pointer prohibited"),
    _c("msg_scalar_minus_ptr", "r6 = r1\nr7 = *(u32 *)(r6 +0)\nr8 = *(u32 *)(r6 +4)\nr0 = 14\n"
       "r0 -= r7\nr0 = 2\nexit",
       "R0 tried to subtract pointer from scalar"),
    _c("msg_get_stack_in_xdp", "r2 = r10\nr2 += -64\nr3 = 64\nr4 = 0\ncall 67\nr0 = 2\nexit",
       "program of this type cannot use helper bpf_get_stack#67", err=errno.EINVAL),
    _c("msg_bpf_loop_cb_stack_too_large", "r1 = 0\n*(u64 *)(r10 -304) = r1\nr1 = 4\n"
       "r2 = subprog[cb]\nr3 = 0\nr4 = 0\ncall 181\nr0 = 2\nexit\ncb:\nr1 = 0\n"
       "*(u64 *)(r10 -256) = r1\nr0 = 0\nexit",
       "combined stack size of 2 calls is 560. Too large",
       funcs=(Func("main"), Func("cb", False, ("int", "void*")))),
    _c("msg_ringbuf_discard_twice", "r1 = MAP(rb)\nr2 = 8\nr3 = 0\ncall 131\n"
       "if r0 == 0 goto out\nr6 = r0\nr1 = r0\nr2 = 0\ncall 133\nr1 = r6\nr2 = 0\ncall 133\n"
       "out:\nr0 = 2\nexit",
       "R1 type=scalar expected=ringbuf_mem"),
    _c("msg_pkt_write_ro_after_check_on_end", "r6 = r1\nr7 = *(u32 *)(r6 +0)\n"
       "r8 = *(u32 *)(r6 +4)\nr0 = r7\nr0 += 4\nif r0 > r8 goto out\nr1 = 0\n"
       "*(u32 *)(r8 -4) = r1\nout:\nr0 = 2\nexit",
       "R8 invalid mem access 'pkt_end'"),
    # -- a load of a spilled scalar's bytes that does not restore the register (its upper
    # half, or more bytes than a 2-byte spill) is no fill: the history records no slot,
    # so the value the load gives needing precision does not make the spill precise and
    # the states at j: still prune (insn_stack_access_flags)
    _c("stack_partial_fill_not_precise", _join("r1 = r6\n*(u64 *)(r10 -8) = r1\n",
       "r1 = r6\n*(u64 *)(r10 -8) = r1\n", "r2 = *(u32 *)(r10 -4)\n" + _VAR_FP16), None,
       processed=46),
    _c("stack_wide_fill_of_narrow_spill", _join("r1 = 0\n*(u16 *)(r10 -8) = r1\n",
       "r1 = r6\n*(u64 *)(r10 -8) = r1\n", "r2 = *(u32 *)(r10 -8)\n" + _VAR_FP16), None,
       processed=46),
    # -- only an array's key is checked for being a constant (can_elide_value_nullness):
    # a hash map's constant key needs no precision, the states at j: prune
    _c("hash_const_key_not_precise", _join("r1 = 0\n*(u32 *)(r10 -8) = r1\n",
       "r1 = r6\n*(u64 *)(r10 -8) = r1\n", "r2 = r10\nr2 += -8\nr1 = MAP(hash)\ncall 1\n"
       "r3 = 0\n"), None, processed=52),
    # -- an ALU op whose range is not tracked (div, mod, a shift by a register) leaves the
    # whole register unknown, ALU32 too (no zero-extension); a variable stack offset is
    # checked for alignment (always strict), for being bounded, then for the range;
    # helper #0 is bpf_unspec, which no program type has
    _c("vc_lsh32_var_whole_unknown", "call 7\nr6 = r0\ncall 7\nw0 <<= w6\nr1 = r10\nr1 += r0\n"
       "r0 = 2\nexit",
       "math between fp pointer and register with unbounded min value is not allowed",
       err=errno.EINVAL),
    _c("vc_arsh32_var_whole_unknown", "call 7\nr6 = r0\nr6 &= 7\ncall 7\nw0 s>>= w6\n"
       "r1 = r10\nr1 += r0\nr0 = 2\nexit",
       "math between fp pointer and register with unbounded min value is not allowed",
       err=errno.EINVAL),
    _c("vc_unbounded_var_stack_read", "call 7\nr0 <<= 32\nr0 >>= 32\nr1 = r10\nr1 += -16\n"
       "r1 += r0\nr0 = *(u8 *)(r1 +0)\nr0 = 2\nexit",
       "invalid unbounded variable-offset read from stack R1"),
    _c("vc_unbounded_var_stack_helper", "call 7\nr0 <<= 32\nr0 >>= 32\nr2 = r10\nr2 += -16\n"
       "r2 += r0\nr1 = MAP(hash)\ncall 1\nr0 = 2\nexit",
       "invalid unbounded variable-offset read from stack R2"),
    _c("vc_mod32_unknown_whole", "call 7\nw0 %= 8\nr1 = r10\nr1 += -16\nr1 += r0\nr2 = 0\n"
       "*(u8 *)(r1 +0) = r2\nr0 = 2\nexit",
       "math between fp pointer and register with unbounded min value is not allowed",
       err=errno.EINVAL),
    _c("vc_unbounded_var_stack_write", "call 7\nw0 &= 7\nw0 = -w0\nr1 = r10\nr1 += r0\n"
       "r2 = 0\n*(u8 *)(r1 -1) = r2\nr0 = 2\nexit",
       "invalid unbounded variable-offset write to stack R1"),
    _c("vc_helper_zero", "call 0\nr0 = 2\nexit",
       "program of this type cannot use helper bpf_unspec#0", err=errno.EINVAL),
    _c("vc_var_stack_misaligned_spill", "call 7\nr0 &= 7\nr1 = r10\nr1 += -16\nr1 += r0\n"
       "*(u64 *)(r1 +0) = r10\nr0 = 2\nexit",
       "misaligned stack access off (0x0; 0x7)+-16+0 size 8"),
    _c("vc_var_stack_aligned_spill", "call 7\nr0 &= 8\nr1 = r10\nr1 += -16\nr1 += r0\n"
       "*(u64 *)(r1 +0) = r10\nr0 = *(u64 *)(r10 -8)\nr0 = 2\nexit",
       None),
    _c("vc_var_stack_misaligned_read", "r2 = 0\n*(u64 *)(r10 -16) = r2\ncall 7\nr0 &= 2\n"
       "r1 = r10\nr1 += -16\nr1 += r0\nr0 = *(u32 *)(r1 +0)\nr0 = 2\nexit",
       "misaligned stack access off (0x0; 0x2)+-16+0 size 4"),
    # -- encodings: check_subprogs' jump checks come first, then resolve_pseudo_ldimm64's
    # pass over every instruction (an LDX of another mode or with an imm, a malformed
    # ld_imm64, an opcode the interpreter lacks); the other reserved fields are do_check's,
    # refused only where a path reaches them (dead code keeps them), and an exit's offset
    # is never looked at
    _c("vc_exit_src", "r0 = 2\nexit",
       "BPF_EXIT uses reserved fields", raw=((1, "src", 1),), err=errno.EINVAL),
    _c("vc_exit_off_ignored", "r0 = 2\nexit",
       None, raw=((1, "off", 1),)),
    _c("vc_mov_k_off", "r0 = 2\nexit",
       "BPF_MOV uses reserved fields", raw=((0, "off", 1),), err=errno.EINVAL),
    _c("vc_movsx32_off32", "r1 = 2\nw0 = w1\nexit",
       "BPF_MOV uses reserved fields", raw=((1, "off", 32),), err=errno.EINVAL),
    _c("vc_addr_space_cast_imm0", "r1 = 2\nr0 = r1\nexit",
       "addr_space_cast insn can only convert between address space 1 and 0", raw=((1, "off", 1),),
       err=errno.EINVAL),
    _c("vc_alu_k_src", "r0 = 2\nr0 += 0\nexit",
       "BPF_ALU uses reserved fields", raw=((1, "src", 2),), err=errno.EINVAL),
    _c("vc_sdiv_off2", "r0 = 2\nr0 s/= 1\nexit",
       "BPF_ALU uses reserved fields", raw=((1, "off", 2),), err=errno.EINVAL),
    _c("vc_neg_x_unknown", "r0 = 2\nr0 = -r0\nr0 = 2\nexit",
       "unknown opcode 8f", raw=((1, "code", 0x8f),), err=errno.EINVAL),
    _c("vc_end_imm8", "r0 = 2\nr0 = le16 r0\nr0 = 2\nexit",
       "BPF_END uses reserved fields", raw=((1, "imm", 8),), err=errno.EINVAL),
    _c("vc_bswap64_to_be_unknown", "r0 = 2\nr0 = bswap16 r0\nr0 = 2\nexit",
       "unknown opcode df", raw=((1, "code", 0xdf),), err=errno.EINVAL),
    _c("vc_ja_imm", "goto +0\nr0 = 2\nexit",
       "BPF_JA uses reserved fields", raw=((0, "imm", 1),), err=errno.EINVAL),
    _c("vc_gotol_off", "gotol +0\nr0 = 2\nexit",
       "BPF_JA uses reserved fields", raw=((0, "off", 1),), err=errno.EINVAL),
    _c("vc_jeq_k_src", "r0 = 2\nif r0 == 0 goto +0\nexit",
       "BPF_JMP/JMP32 uses reserved fields", raw=((1, "src", 1),), err=errno.EINVAL),
    _c("vc_jeq_x_imm", "r0 = 2\nif r0 == r0 goto +0\nexit",
       "BPF_JMP/JMP32 uses reserved fields", raw=((1, "imm", 1),), err=errno.EINVAL),
    _c("vc_jmp_op_f0", "r0 = 2\nif r0 == 0 goto +0\nexit",
       "unknown opcode f5", raw=((1, "code", 0xf5),), err=errno.EINVAL),
    _c("vc_jmp32_call_unknown", "r0 = 2\nif r0 == 0 goto +0\nexit",
       "unknown opcode 86", raw=((1, "code", 0x86), (1, "imm", 7), (1, "dst", 0), (1, "off", 0),),
       err=errno.EINVAL),
    _c("vc_call_src3", "call 7\nr0 = 2\nexit",
       "BPF_CALL uses reserved fields", raw=((0, "src", 3),), err=errno.EINVAL),
    _c("vc_call_helper_off", "call 7\nr0 = 2\nexit",
       "BPF_CALL uses reserved fields", raw=((0, "off", 1),), err=errno.EINVAL),
    _c("vc_callx_unknown", "r1 = 0\ncall 7\nr0 = 2\nexit",
       "unknown opcode 8d", raw=((1, "code", 0x8d), (1, "dst", 1), (1, "imm", 0),),
       err=errno.EINVAL),
    _c("vc_ldx_imm", "r0 = *(u32 *)(r1 +0)\nr0 = 2\nexit",
       "BPF_LDX uses reserved fields", raw=((0, "imm", 1),), err=errno.EINVAL),
    _c("vc_ldx_mode", "r0 = *(u32 *)(r1 +0)\nr0 = 2\nexit",
       "BPF_LDX uses reserved fields", raw=((0, "code", 0xa1),), err=errno.EINVAL),
    _c("vc_ldx_memsx_dw", "r0 = *(u32 *)(r1 +0)\nr0 = 2\nexit",
       "unknown opcode 99", raw=((0, "code", 0x99),), err=errno.EINVAL),
    _c("vc_stx_imm", "r0 = 0\n*(u64 *)(r10 -8) = r0\nr0 = 2\nexit",
       "BPF_STX uses reserved fields", raw=((1, "imm", 1),), err=errno.EINVAL),
    _c("vc_st_src", "*(u64 *)(r10 -8) = 0\nr0 = 2\nexit",
       "BPF_ST uses reserved fields", raw=((0, "src", 1),), err=errno.EINVAL),
    _c("vc_st_atomic_unknown", "r0 = 0\n*(u64 *)(r10 -8) = r0\nr0 = 2\nexit",
       "unknown opcode da", raw=((1, "code", 0xda),), err=errno.EINVAL),
    _c("vc_ldimm64_src7", "r0 = 0 ll\nr0 = 2\nexit",
       "unrecognized bpf_ld_imm64 insn", raw=((0, "src", 7),), err=errno.EINVAL),
    _c("vc_ldimm64_second_dst", "r0 = 0 ll\nr0 = 2\nexit",
       "invalid bpf_ld_imm64 insn", raw=((1, "dst", 1),), err=errno.EINVAL),
    _c("vc_ldimm64_off", "r0 = 0 ll\nr0 = 2\nexit",
       "BPF_LD_IMM64 uses reserved fields", raw=((0, "off", 1),), err=errno.EINVAL),
    _c("vc_opcode_zero", "r0 = 2\nr0 = 2\nexit",
       "unknown opcode 00", raw=((1, "code", 0x0), (1, "dst", 0), (1, "imm", 0),),
       err=errno.EINVAL),
    _c("vc_dead_alu_k_src", "r0 = 2\nif r0 == 2 goto +1\nr0 += 0\nexit",
       None, raw=((2, "src", 2),)),
    _c("vc_dead_exit_src", "r0 = 2\nif r0 == 2 goto +2\nr0 = 1\nexit\nexit",
       None, raw=((3, "src", 1),)),
    _c("vc_dead_ldx_imm", "r0 = 2\nif r0 == 2 goto +1\nr0 = *(u32 *)(r1 +0)\nexit",
       "BPF_LDX uses reserved fields", raw=((2, "imm", 1),), err=errno.EINVAL),
    _c("vc_dead_unknown_opcode", "r0 = 2\nif r0 == 2 goto +1\nr0 += 0\nexit",
       "unknown opcode e7", raw=((2, "code", 0xe7),), err=errno.EINVAL),
    _c("vc_reserved_then_unknown", "r0 = 2\nr0 += 0\nexit",
       "unknown opcode e7", raw=((0, "src", 1), (1, "code", 0xe7),), err=errno.EINVAL),
    _c("vc_ldx_before_reached", "r0 = *(u32 *)(r1 +0)\nr0 = 2\ngoto +0\nexit",
       "BPF_LDX uses reserved fields", raw=((0, "imm", 1), (1, "imm", 1),), err=errno.EINVAL),
    _c("vc_jump_range_before_opcode", "r0 = 2\ngoto +5\nexit",
       "jump out of range from insn 1 to 7", raw=((0, "code", 0xe7),), err=errno.EINVAL),
    _c("vc_pseudo_call_off", "call f\nr0 = 2\nexit\nf:\nr0 = 0\nexit",
       "BPF_CALL uses reserved fields", raw=((0, "off", 1),), err=errno.EINVAL),
    _c("vc_dead_pseudo_call_off", "r0 = 2\nif r0 == 2 goto +1\ncall f\nexit\nf:\nr0 = 0\nexit",
       None, raw=((2, "off", 1),)),
    # -- a 64-bit sign extension (movsx, ldsx) whose source's s32 range fits the narrower
    # type keeps that range, whatever the upper half or the 64-bit range
    _c("vc_movsx32_keeps_s32_range", "call 7\nr0 &= 0xf\nr0 -= 8\nw0 = w0\nr0 = (s32)r0\n"
       "r0 += 8\nr1 = r10\nr1 += -16\nr1 += r0\n*(u8 *)(r1 +0) = r0\nr0 = 2\nexit",
       None),
    _c("vc_movsx8_of_s32_range", "call 7\nif w0 s> 7 goto +9\nif w0 s< -8 goto +8\n"
       "r0 = (s8)r0\nr0 += 8\nr1 = r10\nr1 += -16\nr1 += r0\nr2 = 0\n*(u8 *)(r1 +0) = r2\n"
       "r0 = 2\nexit",
       None),
    _c("vc_movsx8_wild_upper_half", "call 7\nif w0 > 0x7f goto +7\nr0 = (s8)r0\nr1 = r10\n"
       "r1 += -128\nr1 += r0\nr2 = 0\n*(u8 *)(r1 +0) = r2\nr0 = 2\nexit",
       None),
    _c("vc_movsx8_wild_upper_half_oob", "call 7\nif w0 > 0x7f goto +7\nr0 = (s8)r0\nr1 = r10\n"
       "r1 += -127\nr1 += r0\nr2 = 0\n*(u8 *)(r1 +0) = r2\nr0 = 2\nexit",
       "invalid variable-offset write to stack R1 var_off=(0x0; 0x7f) off=-127 size=1",
       err=errno.EINVAL),
    _c("vc_ldsx8_of_spill_range", "call 7\nr0 &= 0xf\nr0 -= 8\n*(u64 *)(r10 -8) = r0\n"
       "r1 = *(s8 *)(r10 -8)\nr1 += 8\nr2 = r10\nr2 += -24\nr2 += r1\nr3 = 0\n"
       "*(u8 *)(r2 +0) = r3\nr0 = 2\nexit",
       None),
    _c("vc_movsx8_negative_range", "call 7\nr0 &= 0xf\nr0 -= 16\nr0 = (s8)r0\nr0 += 16\n"
       "r1 = r10\nr1 += -16\nr1 += r0\nr2 = 0\n*(u8 *)(r1 +0) = r2\nr0 = 2\nexit",
       None),
    # -- an atomic reads the memory twice (check_atomic_rmw): first into no register (a
    # variable stack offset may not), then, when it fetches, as a load of that size into
    # the fetching register (a stack slot's spill is filled, a pointer too); the slot is
    # then written (no longer a spill)
    _c("vc_atomic_fetch_fills_spill", "r1 = 3\n*(u64 *)(r10 -8) = r1\nr1 = 1\n"
       "r1 = atomic64_fetch_add((u64 *)(r10 -8), r1)\nr2 = r10\nr2 += r1\nr0 = 2\nexit",
       None),
    _c("vc_atomic_stack_var_off", "r1 = 0\n*(u64 *)(r10 -8) = r1\n*(u64 *)(r10 -16) = r1\n"
       "call 7\nr0 &= 8\nr1 = r10\nr1 += -16\nr1 += r0\nr2 = 1\nlock *(u64 *)(r1 +0) += r2\n"
       "r0 = 2\nexit",
       "variable offset stack pointer cannot be passed into helper function; "
       "var_off=(0x0; 0x8) off=-16 size=8"),
    _c("vc_atomic_fetch_spilled_ptr", "*(u64 *)(r10 -8) = r1\nr2 = 0\n"
       "r2 = atomic64_fetch_add((u64 *)(r10 -8), r2)\nr0 = *(u32 *)(r2 +0)\nr0 = 2\nexit",
       None),
    _c("vc_atomic_cmpxchg_spilled_ptr", "*(u64 *)(r10 -8) = r1\nr0 = 0\nr2 = 0\n"
       "r0 = atomic64_cmpxchg((u64 *)(r10 -8), r0, r2)\nr0 = *(u32 *)(r0 +0)\nr0 = 2\nexit",
       None),
    _c("vc_atomic_fetch32_of_spill64", "r1 = 3\n*(u64 *)(r10 -8) = r1\nw1 = 1\n"
       "w1 = atomic_fetch_add((u32 *)(r10 -8), w1)\nr2 = r10\nr2 += r1\nr0 = 2\nexit",
       None),
    _c("vc_atomic_fetch_var_off_oob", "call 7\nr0 &= 8\nr1 = r10\nr1 += r0\nr2 = 1\n"
       "r2 = atomic64_fetch_add((u64 *)(r1 -8), r2)\nr0 = 2\nexit",
       "invalid variable-offset read from stack R1 var_off=(0x0; 0x8) off=-8 size=8",
       err=errno.EINVAL),
    _c("vc_atomic_xchg_slot_misc", "r1 = 7\n*(u64 *)(r10 -8) = r1\nr2 = 1\n"
       "r2 = atomic64_xchg((u64 *)(r10 -8), r2)\nr3 = *(u64 *)(r10 -8)\nr4 = r10\nr4 += r3\n"
       "r0 = 2\nexit",
       "math between fp pointer and register with unbounded min value is not allowed",
       err=errno.EINVAL),
    # -- JSET: the constant may be either operand of a branch Linux decides; on the
    # branch where no tested bit is set the ranges are forgotten, then come from the
    # narrowed tnum alone (the branch where one is keeps them)
    _c("vc_jset_false_forgets_range", "call 7\nif r0 > 100 goto +8\nif r0 < 10 goto +7\n"
       "if r0 & 0x40 goto +6\nr1 = r10\nr1 += -522\nr1 += r0\nr2 = 0\nr2 = 0\n"
       "*(u8 *)(r1 +0) = r2\nr0 = 2\nexit",
       "invalid variable-offset write to stack R1 var_off=(0x0; 0x3f) off=-522 size=1"),
    _c("vc_jset_true_keeps_range", "call 7\nif r0 > 100 goto +8\nif r0 < 10 goto +7\n"
       "if r0 & 0x40 goto +1\ngoto +5\nr1 = r10\nr1 += -128\nr1 += r0\nr2 = 0\n"
       "*(u8 *)(r1 +20) = r2\nr0 = 2\nexit",
       None),
    _c("vc_jset_const_src_taken", "call 7\nr6 = r0\nr6 |= 255\nr9 = 0x80\nif r9 & r6 goto +4\n"
       "r1 = r10\nr1 += r6\nr2 = 0\n*(u8 *)(r1 +0) = r2\nr0 = 2\nexit",
       None),
    _c("vc_jset32_false_forgets_range", "call 7\nif w0 > 100 goto +8\nif w0 < 10 goto +7\n"
       "if w0 & 0x40 goto +6\nw0 += -10\nr1 = r10\nr1 += -64\nr1 += r0\nr2 = 0\n"
       "*(u8 *)(r1 +0) = r2\nr0 = 2\nexit",
       "invalid unbounded variable-offset write to stack R1"),
    # -- a 64-bit JEQ/JNE is decided by the subregisters' ranges when the 64-bit ones
    # cannot; a scalar's link constant (rX += const) is no offset check_reg_sane_offset
    # refuses: its bounds are
    _c("vc_jne64_subreg_range_decides", "call 7\nr6 = r0\nw6 s>>= 22\nif r6 != 65535 goto +5\n"
       "r1 = r10\nr1 += -64\nr1 += r6\nr2 = 0\n*(u8 *)(r1 +0) = r2\nr0 = 2\nexit",
       None),
    _c("vc_linked_scalar_big_delta_to_fp", "call 7\nr0 &= 0xff\nr8 = r0\nr8 += 0x7fffffff\n"
       "r1 = r10\nr1 += r8\nr0 = 2\nexit",
       "value 2147483647 makes fp pointer be out of bounds", err=errno.EINVAL),
    _c("vc_linked_scalar_neg_delta_to_fp", "call 7\nr0 &= 0xff\nr8 = r0\nr8 += -0x20000000\n"
       "r1 = r10\nr1 += r8\nr0 = 2\nexit",
       "value -536870912 makes fp pointer be out of bounds", err=errno.EINVAL),
    # -- pointer arithmetic: the scalar operand's bounds are checked as ever, the
    # pointer's own offsets (fixed and variable) come out as 'pointer offset N'
    _c("vc_ptr_var_offset_overflow", "call 7\nr7 = r0\ncall 7\nr8 = r0\nr2 = 0\n"
       "*(u32 *)(r10 -4) = r2\nr2 = r10\nr2 += -4\nr1 = MAP(arr)\ncall 1\n"
       "if r0 == 0 goto out\nr6 = r0\nr7 &= 8\nif r8 s< 12 goto out\nr6 += r7\nr6 += r8\n"
       "out:\nr0 = 2\nexit",
       "map_value pointer offset -9223372036854775808 is not allowed", err=errno.EINVAL),
    _c("vc_ptr_minus_big_scalar", "call 7\nr7 = r0\ncall 7\nr8 = r0\nr2 = 0\n"
       "*(u32 *)(r10 -4) = r2\nr2 = r10\nr2 += -4\nr1 = MAP(arr)\ncall 1\n"
       "if r0 == 0 goto out\nr6 = r0\nr7 &= 8\nif r8 s< 12 goto out\nr6 -= r8\nr6 += r7\n"
       "r0 = *(u16 *)(r6 +12)\nout:\nr0 = 2\nexit",
       "map_value pointer offset -9223372036854775807 is not allowed", err=errno.EINVAL),
    # -- ld_imm64 of a map by index needs the fd_array pyxdp never passes
    _c("vc_ldimm64_map_idx_no_fd_array", "r1 = 0 ll\nr0 = 2\nexit",
       "fd_idx without fd_array is invalid", raw=((0, "src", 5),), err=errno.EPROTO),
    _c("vc_ldimm64_map_idx_value_no_fd_array", "r1 = 0 ll\nr0 = 2\nexit",
       "fd_idx without fd_array is invalid", raw=((0, "src", 6),), err=errno.EPROTO),
    _c("vc_ldimm64_func_off", "r1 = subprog[cb]\nr0 = 2\nexit\ncb:\nr0 = 0\nexit",
       "BPF_LD_IMM64 uses reserved fields", raw=((0, "off", 1),), err=errno.EINVAL),
    # -- ld_imm64 of a kernel BTF id (BPF_PSEUDO_BTF_ID): resolve_pseudo_ldimm64 wants a
    # VAR or a FUNC of vmlinux's BTF, wherever the load is
    _c("vc_ldimm64_btf_id_void", "r1 = 0 ll\nr0 = 2\nexit",
       "pseudo btf_id 0 in ldimm64 isn't KIND_VAR or KIND_FUNC",
       raw=((0, "src", 3), (0, "imm", 0),),
       err=errno.EINVAL),
    _c("vc_ldimm64_btf_id_int", "r1 = 0 ll\nr0 = 2\nexit",
       "pseudo btf_id 1 in ldimm64 isn't KIND_VAR or KIND_FUNC",
       raw=((0, "src", 3), (0, "imm", 1),),
       err=errno.EINVAL),
    _c("vc_ldimm64_btf_id_past_end", "r1 = 0 ll\nr0 = 2\nexit",
       "ldimm64 insn specifies invalid btf_id 2147483647.",
       raw=((0, "src", 3), (0, "imm", 2147483647),),
       err=errno.ENOENT),
    _c("vc_ldimm64_btf_id_negative", "r1 = 0 ll\nr0 = 2\nexit",
       "ldimm64 insn specifies invalid btf_id -5.", raw=((0, "src", 3), (0, "imm", -5),),
       err=errno.ENOENT),
    _c("vc_ldimm64_btf_id_dead_code", "r0 = 2\nif r0 == 2 goto +2\nr1 = 0 ll\nexit",
       "pseudo btf_id 1 in ldimm64 isn't KIND_VAR or KIND_FUNC",
       raw=((2, "src", 3), (2, "imm", 1),),
       err=errno.EINVAL),
    # -- calls (vc3_): a helper's map type is checked after all its arguments ---------------
    _c("vc3_lookup_ringbuf_key_zero", _LOOKUP.format(m="rb") + "r0 = 2\nexit",
       "invalid zero-sized read"),
    _c("vc3_delete_ringbuf_key_zero", _LOOKUP.format(m="rb").replace("call 1", "call 3") +
       "r0 = 2\nexit", "invalid zero-sized read"),
    _c("vc3_rb_output_hash_bad_data", "r1 = MAP(hash)\nr2 = 0\nr3 = 8\nr4 = 0\ncall 130\n"
       "r0 = 2\nexit", "R2 type=scalar expected=fp, pkt, pkt_meta, map_key, map_value, mem, "
       "ringbuf_mem, buf, trusted_ptr_"),
    # callbacks: bpf_loop's index is any scalar; R0 at a callback's exit a scalar; no
    # function returns a stack pointer, its caller's either; for-each needs a map that walks
    _c("vc3_loop_index_unbounded", _LOOP.format(cb="r1 = 0\n*(u64 *)(r10 -8) = r1\nr2 = r10\n"
       "r2 += -8\nr2 += r1\nr0 = 0").replace("r1 = 0\n*(u64", "r3 = 0\n*(u64").replace(
       "*(u64 *)(r10 -8) = r1", "*(u64 *)(r10 -8) = r3"),
       "math between fp pointer and register with unbounded min value is not allowed",
       funcs=_CB, err=errno.EINVAL),
    _c("vc3_loop_ret_uninit", _LOOP.format(cb="r1 = 0"), "R0 not a scalar value", funcs=_CB),
    _c("vc3_loop_ret_fp", _LOOP.format(cb="r0 = r10"),
       "cannot return stack pointer to the caller", funcs=_CB, err=errno.EINVAL),
    _c("vc3_loop_ret_ctx_fp", _LOOP.format(cb="r0 = r2").replace("r3 = 0", "r3 = r10\nr3 += -8"),
       "cannot return stack pointer to the caller", funcs=_CB, err=errno.EINVAL),
    _c("vc3_sub_ret_caller_fp", "r1 = r10\nr1 += -8\ncall f\nr0 = 2\nexit\nf:\nr0 = r1\nexit",
       "cannot return stack pointer to the caller", err=errno.EINVAL),
    _c("vc3_foreach_ringbuf", "r1 = MAP(rb)\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\ncall 164\n"
       "r0 = 2\nexit\ncb:\nr0 = 0\nexit", "callback function not allowed for map",
       funcs=_CB, err=_ENOTSUPP),
    _c("vc3_foreach_devmap", "r1 = MAP(dev)\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\ncall 164\n"
       "r0 = 2\nexit\ncb:\nr0 = 0\nexit", "callback function not allowed for map",
       funcs=_CB, err=_ENOTSUPP),
    _c("vc3_foreach_ret_uninit", "r1 = MAP(hash)\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\ncall 164\n"
       "r0 = 2\nexit\ncb:\nexit", "R0 not a scalar value", funcs=_CB),
    # a kernel function called by name that the kernel's BTF does not tag as a kfunc
    _c("vc3_kfunc_helper_body", "call KFUNC(bpf_ktime_get_ns)\nr0 = 2\nexit",
       "calling kernel function bpf_ktime_get_ns is not allowed"),
    _c("vc3_kfunc_untagged", "call KFUNC(bpf_get_smp_processor_id)\nr0 = 2\nexit",
       "calling kernel function bpf_get_smp_processor_id is not allowed"),
    # bpf_snprintf: its output may be NULL (with size 0); the constant format's conversions
    # are the kernel's and no more than data_len / 8; a data_len not of u64s is refused
    # without a message
    _c("vc3_snprintf_out_null", _LOOKUP_OUT.format(m="fmts") + _SNPRINTF.format(
       out="r1 = 0\nr2 = 0", n=8), None),
    _c("vc3_snprintf_too_few_args", _LOOKUP_OUT.format(m="fmts") + _SNPRINTF.format(
       out="r1 = r10\nr1 += -32\nr2 = 16", n=0), "Invalid format string", err=errno.EINVAL),
    _c("vc3_snprintf_data_len_odd", _LOOKUP_OUT.format(m="fmts") + _SNPRINTF.format(
       out="r1 = r10\nr1 += -32\nr2 = 16", n=4), "18: (85) call bpf_snprintf#165",
       err=errno.EINVAL),
    _c("vc3_snprintf_ok", _LOOKUP_OUT.format(m="fmts") + _SNPRINTF.format(
       out="r1 = r10\nr1 += -32\nr2 = 16", n=8), None),
    # bpf_loop marks its count precise: a pointer there trips mark_chain_precision's check
    _c("vc3_loop_count_pkt", _LOOP.format(cb="r0 = 0").replace("r1 = 4", "r1 = *(u32 *)(r1 +0)"),
       "verifier bug: backtracking misuse", funcs=_CB, err=errno.EFAULT),
    _c("vc3_loop_count_ctx", _LOOP.format(cb="r0 = 0").replace("r1 = 4\n", ""),
       "verifier bug: backtracking misuse", funcs=_CB, err=errno.EFAULT),
    _c("vc3_loop_count_ifindex", _LOOP.format(cb="r0 = 0").replace(
       "r1 = 4", "r1 = *(u32 *)(r1 +12)"), None, funcs=_CB),
    _c("vc3_lookup_progs_key_oob", "r2 = r10\nr2 += -600\nr1 = MAP(progs)\ncall 1\nr0 = 2\n"
       "exit", "invalid read from stack R2 off=-600 size=4"),
    # adjust_ptr_min_max_vals checks the operands' offsets before the operator
    _c("vc2_ptr_and_unbounded_scalar", "call 7\nr1 = r10\nr1 &= r0\nr0 = 2\nexit",
       "math between fp pointer and register with unbounded min value is not allowed",
       err=errno.EINVAL),
    _c("vc2_ptr_mul_huge_const", "r1 = r10\nr2 = 0x40000000\nr1 *= r2\nr0 = 2\nexit",
       "math between fp pointer and 1073741824 is not allowed", err=errno.EINVAL),
    # scalar_min_max_add: an add whose both unsigned ends wrap keeps its (wrapped) bounds,
    # so the access after a compare they rule out is dead
    _c("vc2_add32_both_ends_wrap", "call 7\nif w0 < 0x80000000 goto out\nw0 += -16\n"
       "if w0 >= 0x7ffffff0 goto out\nr0 = *(u8 *)(r0 +0)\nout:\nr0 = 2\nexit", None),
    _c("vc2_add64_both_ends_wrap", "call 7\nr1 = 0x8000000000000000 ll\nif r0 < r1 goto out\n"
       "r0 += -16\nr1 = 0x7ffffffffffffff0 ll\nif r0 >= r1 goto out\nr0 = *(u8 *)(r0 +0)\n"
       "out:\nr0 = 2\nexit", None),
    # a jmp32 against a never-NULL pointer is not decided: both ways are walked
    _c("vc2_jmp32_map_ptr_ne_zero_undecided", "r7 = r10\nr1 = MAP(arr)\nif w1 != 0 goto out\n"
       "r0 = *(u8 *)(r7 +0)\nout:\nr0 = 2\nexit", "invalid read from stack R7 off=0 size=1"),
    _c("vc2_jmp32_map_value_eq_zero_undecided", "*(u32 *)(r10 -4) = 0\nr2 = r10\nr2 += -4\n"
       "r1 = MAP(arr)\ncall 1\nif r0 == 0 goto out\nr7 = r10\nr3 = 0\nif w0 != w3 goto out\n"
       "r0 = *(u8 *)(r7 +0)\nout:\nr0 = 2\nexit", "invalid read from stack R7 off=0 size=1"),
    # sync_linked_regs runs for the source, then the destination: two linked operands of
    # w9 < w7 both end with w7's refined u32 bounds [1, U32_MAX] (so smin is S64_MIN + 1)
    _c("vc2_linked_operands_sync_src_first", "call 7\nr7 = r0\nr9 = r7\nif w9 >= w7 goto use\n"
       "r1 = r10\nr1 += r9\nuse:\nr0 = 2\nexit",
       "value -9223372036854775807 makes fp pointer be out of bounds", err=errno.EINVAL),
    # a 64-bit JEQ intersects the 64-bit bounds and tnums only: r8 keeps its u32 [0, 255]
    # (not r9's s32 [-128, 127] met with it), so be16 spreads 0xff to 0xff00
    _c("vc2_jeq64_keeps_subreg_bounds", "call 7\nr8 = r0\nr8 &= 0xff\ncall 7\nw9 = (s8)w0\n"
       "if r8 != r9 goto out\nr8 = be16 r8\nr1 = r10\nr1 += -64\nr1 += r8\n"
       "r0 = *(u64 *)(r1 +0)\nout:\nr0 = 2\nexit",
       "invalid variable-offset read from stack R1 var_off=(0x0; 0xff00) off=-64 size=8",
       err=errno.EINVAL),
    # a sign-extending move of a value below the sign bit stays linked to its source: the
    # compare of the copy bounds r8 too (its reach past the stack is then EACCES, not EINVAL)
    _c("vc2_movsx64_no_sext_stays_linked", "call 7\nr8 = r0\nr8 &= 0xff\nr7 = (s16)r8\n"
       "if r7 < 31 goto out\nr1 = r10\nr1 += -16\nr1 += r8\nr0 = *(u8 *)(r1 +0)\nout:\n"
       "r0 = 2\nexit",
       "invalid variable-offset read from stack R1 var_off=(0x0; 0xff) off=-16 size=1"),
    _c("vc2_movsx32_no_sext_stays_linked", "call 7\nr8 = r0\nr8 &= 0x7f\nw7 = (s16)w8\n"
       "if w7 < 31 goto out\nr1 = r10\nr1 += -16\nr1 += r8\nr0 = *(u8 *)(r1 +0)\nout:\n"
       "r0 = 2\nexit",
       "invalid variable-offset read from stack R1 var_off=(0x0; 0x7f) off=-16 size=1"),
    # r = (s32)r keeps the low half's u32 bounds (here at most 0xffffffc0): w8 s> -2 then
    # rules out -1, so r8 is non-negative and the pointer math passes
    _c("vc2_movsx32_keeps_u32_bounds", "call 7\nr7 = r0\nr7 <<= 6\nr8 = (s32)r7\n"
       "if w8 s<= -2 goto out\nr1 = r10\nr1 += -64\nr1 += r8\nr0 = *(u8 *)(r1 +0)\nout:\n"
       "r0 = 2\nexit", "invalid unbounded variable-offset read from stack R1"),
    # a sign-extending fill of a spilled [0, 255] is no longer linked to the spill's copies:
    # the compare of r8 leaves r7 at s8's [-128, 127]
    _c("vc2_ldsx_fill_unlinks", "*(u64 *)(r10 -8) = 0\ncall 7\nr7 = r0\nr7 &= 0xff\nr8 = r7\n"
       "*(u64 *)(r10 -8) = r7\nr7 = *(s8 *)(r10 -8)\nif r8 s< 3 goto out\nr1 = r10\n"
       "r1 += -64\nr1 += r7\nr0 = *(u8 *)(r1 +0)\nout:\nr0 = 2\nexit",
       "invalid variable-offset read from stack R1 var_off=(0x0; 0xffffffffffffffff) off=-64 "
       "size=1", err=errno.EINVAL),
    # -- impossible bounds (vc4_): a register compared with itself is refined as two
    # registers in place; reg_bounds_sync runs on the impossible range, then
    # reg_bounds_sanity_check reports it and forgets the ranges (the tnum kept), or refuses
    # under BPF_F_TEST_REG_INVARIANTS
    _c("vc4_self_jlt32_forgets_range", _SELF.format(init="r6 &= 1", cmp="w6 < w6"),
       "math between fp pointer and register with unbounded min value is not allowed",
       err=errno.EINVAL),
    _c("vc4_self_jlt32_invariants_flag", _SELF.format(init="r6 &= 1", cmp="w6 < w6"),
       "verifier bug: REG INVARIANTS VIOLATION (true_reg1): range bounds violation "
       "u64=[0x0, 0x1] s64=[0x0, 0x1] u32=[0x1, 0x0] s32=[0x0, 0x1] var_off=(0x0, 0x1)",
       flags=_TEST_REG_INVARIANTS, err=errno.EFAULT),
    _c("vc4_self_jsle32_forgets_range", _SELF.format(init="r6 &= 1\nr6 += -1",
                                                     cmp="w6 s<= w6"),
       "math between fp pointer and register with unbounded min value is not allowed",
       err=errno.EINVAL),
    # (the sync of s32 [0, -1] wraps: s64 [0, -1], u64 [0, U64_MAX])
    _c("vc4_self_jsle32_invariants_flag", _SELF.format(init="r6 &= 1\nr6 += -1",
                                                       cmp="w6 s<= w6"),
       "verifier bug: REG INVARIANTS VIOLATION (false_reg1): range bounds violation "
       "u64=[0x0, 0xffffffffffffffff] s64=[0x0, 0xffffffffffffffff] u32=[0x0, 0xffffffff] "
       "s32=[0x0, 0xffffffff] var_off=(0x0, 0xffffffffffffffff)",
       flags=_TEST_REG_INVARIANTS, err=errno.EFAULT),
    # reg_bounds_sync deduces three rounds: the third narrows s32 to [-128, -2], so w8 is
    # never -1 (r8 took r7's bounds from the self-compare, linked)
    _c("vc4_deduce_third_round", "call 7\nr6 = r0\nr6 |= 2\ncall 7\nr8 = (s8)r0\nr7 = r8\n"
       "if r6 >= r8 goto out\nif r7 >= r7 goto out\nif w8 < 0x80000000 goto out\n"
       "if w8 == -1 goto bad\nout:\nr0 = 2\nexit\nbad:\nr0 = *(u8 *)(r10 +0)\nexit", None),
    # a map key argument (ARG_PTR_TO_MAP_KEY, no MEM_RDONLY) takes no read-only memory
    _c("vc4_lookup_key_rdonly_slice", _XDP_SLICE + "r2 = r0\nr1 = MAP(hash)\ncall 1\n"
       "out:\nr0 = 1\nexit", f"R2 type=rdonly_mem expected={_MEM_ARG}"),
    _c("vc4_delete_key_rdonly_slice", _XDP_SLICE + "r2 = r0\nr1 = MAP(hash)\ncall 3\n"
       "out:\nr0 = 1\nexit", f"R2 type=rdonly_mem expected={_MEM_ARG}"),
    # -- ld_imm64 of a kernel symbol's BTF id (vc4_): check_pseudo_btf_id wants its address
    # from kallsyms; a function's is read-only memory of no size (which XDP may return)
    _c("vc4_ksym_func", "r1 = KSYM(bpf_xdp_adjust_head)\nr0 = 2\nexit", None),
    _c("vc4_ksym_func_returned", "r0 = KSYM(bpf_xdp_adjust_head)\nexit", None),
    _c("vc4_ksym_func_read", "r1 = KSYM(bpf_xdp_adjust_head)\nr0 = *(u8 *)(r1 +0)\nr0 = 2\n"
       "exit", "R1 min value is outside of the allowed memory range"),
    _c("vc4_ksym_func_write", "r1 = KSYM(bpf_xdp_adjust_head)\nr2 = 0\n"
       "*(u8 *)(r1 +0) = r2\nr0 = 2\nexit", "R1 cannot write into rdonly_mem"),
    _c("vc4_ksym_func_lookup_key", "r2 = KSYM(bpf_xdp_adjust_head)\nr1 = MAP(hash)\n"
       "call 1\nr0 = 2\nexit", f"R2 type=rdonly_mem expected={_MEM_ARG}"),
    _c("vc4_ksym_func_csum_diff_empty", "r1 = KSYM(bpf_xdp_adjust_head)\nr2 = 0\nr3 = 0\n"
       "r4 = 0\nr5 = 0\ncall 28\nr0 = 2\nexit", None),
    # (this kernel's kallsyms has no data symbols: no CONFIG_KALLSYMS_ALL)
    _c("vc4_ksym_percpu_var_no_address", "r1 = KSYM(bpf_prog_active)\nr0 = 2\nexit",
       "ldimm64 failed to find the address for kernel symbol 'bpf_prog_active'.",
       err=errno.ENOENT),
    # a module's symbol names its BTF by fd in the second half: no BTF object there
    _c("vc4_ksym_module_btf_fd_not_btf", "r1 = KSYM(bpf_xdp_adjust_head)[btf_fd:2147483632]\n"
       "r0 = 2\nexit", "invalid module BTF object FD specified.", err=errno.EINVAL),
    _c("vc4_ksym_no_address_dead_code", "r0 = 2\nif r0 == 2 goto +2\n"
       "r1 = KSYM(bpf_prog_active)\nexit",
       "ldimm64 failed to find the address for kernel symbol 'bpf_prog_active'.",
       err=errno.ENOENT),
    # -- a map value's address (vc5_): resolve_pseudo_ldimm64 takes the offset from the
    # second half (below BPF_MAX_VAR_OFF) and map_direct_value_addr, an array's of one
    # entry only, refuses it at the value's end; in program order with the encoding checks
    _c("vc5_map_value_off_at_end", "r1 = MAP_VALUE(fmts, 16)\nr0 = 2\nexit",
       "invalid access to map value pointer, value_size=16 off=16", err=errno.EINVAL),
    _c("vc5_map_value_off_inside", "r1 = MAP_VALUE(fmts, 8)\nr0 = *(u64 *)(r1 +0)\n"
       "r0 = 2\nexit", None),
    _c("vc5_map_value_off_read_past", "r1 = MAP_VALUE(fmts, 9)\nr0 = *(u64 *)(r1 +0)\n"
       "r0 = 2\nexit", "R1 min value is outside of the allowed memory range"),
    _c("vc5_map_value_off_negative", "r1 = MAP_VALUE(fmts, -8)\nr0 = 2\nexit",
       "direct value offset of 4294967288 is not allowed", err=errno.EINVAL),
    _c("vc5_map_value_off_max_var_off", "r1 = MAP_VALUE(fmts, 536870912)\nr0 = 2\nexit",
       "direct value offset of 536870912 is not allowed", err=errno.EINVAL),
    _c("vc5_map_value_array_of_four", "r1 = MAP_VALUE(arr, 0)\nr0 = 2\nexit",
       "invalid access to map value pointer, value_size=16 off=0", err=_ENOTSUPP),
    _c("vc5_map_value_hash", "r1 = MAP_VALUE(hash, 0)\nr0 = 2\nexit",
       "no direct value access support for this map type", err=errno.EINVAL),
    _c("vc5_map_value_ringbuf", "r1 = MAP_VALUE(rb, 0)\nr0 = 2\nexit",
       "no direct value access support for this map type", err=errno.EINVAL),
    _c("vc5_map_value_prog_array", "r1 = MAP_VALUE(progs, 0)\nr0 = 2\nexit",
       "no direct value access support for this map type", err=errno.EINVAL),
    _c("vc5_map_value_dead_code", "r0 = 2\nexit\nr1 = MAP_VALUE(hash, 0)\nexit",
       "no direct value access support for this map type", err=errno.EINVAL),
    _c("vc5_map_value_wronly_read", "r1 = MAP_VALUE(wo, 0)\nr0 = *(u64 *)(r1 +0)\n"
       "r0 = 2\nexit", "read from map forbidden, value_size=8 off=0 size=8"),
    _c("vc5_map_value_wronly_write", "r1 = MAP_VALUE(wo, 0)\n*(u64 *)(r1 +0) = 0\n"
       "r0 = 2\nexit", None),
    _c("vc5_map_value_before_ldx_reserved", "r1 = MAP_VALUE(hash, 0)\n"
       "r0 = *(u64 *)(r10 -8)\nr0 = 2\nexit",
       "no direct value access support for this map type", err=errno.EINVAL,
       raw=((2, "imm", 1),)),
    _c("vc5_map_value_after_ldx_reserved", "r0 = *(u64 *)(r10 -8)\n"
       "r1 = MAP_VALUE(hash, 0)\nr0 = 2\nexit", "BPF_LDX uses reserved fields",
       err=errno.EINVAL, raw=((0, "imm", 1),)),
    _c("vc5_map_value_before_unknown_opcode", "r1 = MAP_VALUE(hash, 0)\nr0 = 2\nr0 = 2\n"
       "exit", "no direct value access support for this map type", err=errno.EINVAL,
       raw=((2, "code", 0xFF),)),
    # (a sleepable program's map compatibility is checked first, load by load)
    _sys("vc5_map_value_sys_offset_first", "r1 = MAP_VALUE(fmts, 100)\nr1 = MAP(dev)\n"
         "r0 = 0\nexit", "invalid access to map value pointer, value_size=16 off=100",
         err=errno.EINVAL),
    _sys("vc5_map_value_sys_devmap_first", "r1 = MAP(dev)\nr1 = MAP_VALUE(fmts, 100)\n"
         "r0 = 0\nexit", "Sleepable programs can only use array, hash, ringbuf and local "
         "storage maps", err=errno.EINVAL),
    _c("vc5_map_value_strtol_offset", "r1 = MAP_VALUE(fmts, 2)\nr2 = 4\nr3 = 0\n"
       "r4 = r10\nr4 += -8\ncall 105\nr0 = 2\nexit", None),
    _c("vc5_map_value_snprintf_unterminated", "r1 = r10\nr1 += -16\nr2 = 16\n"
       "r3 = MAP_VALUE(fmts, 8)\nr4 = 0\nr5 = 0\ncall 165\nr0 = 2\nexit",
       "string is not zero-terminated", err=errno.EINVAL),
    # -- a global function's pointer to an empty struct (vc5_): btf_resolve_size gives it
    # 0 bytes (void has no size), so check_mem_reg takes any memory, NULL and maybe-NULL
    # included, and the callee may access none of it
    _c("vc5_global_mem0_null", "r1 = 0\ncall fn\nr0 = 2\nexit\nfn:\nr0 = 0\nexit", None,
       funcs=_G0),
    _c("vc5_global_mem0_uninit_stack", "r1 = r10\nr1 += -16\ncall fn\nr0 = 2\nexit\nfn:\n"
       "r0 = 0\nexit", None, funcs=_G0),
    _c("vc5_global_mem0_maybe_null_value", _LOOKUP_ARR + "r1 = r0\ncall fn\nr0 = 2\nexit\n"
       "fn:\nr0 = 0\nexit", None, funcs=_G0),
    _c("vc5_global_mem0_read", "r1 = r10\nr1 += -16\ncall fn\nr0 = 2\nexit\nfn:\n"
       "if r1 == 0 goto +1\nr0 = *(u8 *)(r1 +0)\nr0 = 0\nexit",
       "R1 min value is outside of the allowed memory range", funcs=_G0),
    _c("vc5_global_mem0_unchecked", "r1 = r10\nr1 += -16\ncall fn\nr0 = 2\nexit\nfn:\n"
       "r0 = *(u8 *)(r1 +0)\nr0 = 0\nexit", "R1 invalid mem access 'mem_or_null'",
       funcs=_G0),
    _c("vc5_global_mem0_ctx", "call fn\nr0 = 2\nexit\nfn:\nr0 = 0\nexit",
       "Caller passes invalid args into func#1 ('fn')", funcs=_G0, err=errno.EINVAL),
    _c("vc5_global_mem0_rodata", "r1 = MAP(rodata)\ncall fn\nr0 = 2\nexit\nfn:\nr0 = 0\n"
       "exit", "Caller passes invalid args into func#1 ('fn')", funcs=_G0, err=errno.EINVAL),
    # (check_func_arg_reg_off refuses a modified ctx with -EACCES before any other check)
    _c("vc5_global_mem0_modified_ctx", "r1 += 4\ncall fn\nr0 = 2\nexit\nfn:\nr0 = 0\n"
       "exit", "Caller passes invalid args into func#1 ('fn')", funcs=_G0),
    _c("vc5_global_dynptr_modified_ctx", "r1 += 4\ncall fn\nr0 = 2\nexit\nfn:\nr0 = 0\n"
       "exit", "Caller passes invalid args into func#1 ('fn')",
       funcs=(Func("main", True, ("ctx",)), Func("fn", True, ("dynptr",)))),
    _c("vc5_global_void_ptr", "r1 = r10\nr1 += -16\ncall fn\nr0 = 2\nexit\nfn:\n"
       "r0 = 0\nexit", "Caller passes invalid args into func#1 ('fn')",
       funcs=(Func("main", True, ("ctx",)), Func("fn", True, ("void*",))), err=errno.EINVAL),
    # -- a global function that may throw (vc5_): a bpf_throw in it or in a function it
    # calls, reached or not, and the call site exits at once as a bpf_throw there would
    _c("vc5_global_throw_ringbuf_leak", _GT_RB.format(sub=_GT_THROW), _GT_LEAK,
       funcs=_GT_FUNCS, err=errno.EINVAL),
    _c("vc5_global_throw_dead", _GT_RB.format(sub="r0 = 2\nif r0 == 2 goto +2\n" + _GT_THROW),
       _GT_LEAK, funcs=_GT_FUNCS, err=errno.EINVAL),
    _c("vc5_global_throw_via_static", _GT_RB.format(sub="call st\nr0 = 0\nexit\nst:\n" +
                                                        _GT_THROW), _GT_LEAK,
       funcs=(*_GT_FUNCS, Func("st")), err=errno.EINVAL),
    _c("vc5_global_throw_via_global", _GT_RB.format(sub="call g2\nr0 = 0\nexit\ng2:\n" +
                                                        _GT_THROW), _GT_LEAK,
       funcs=(*_GT_FUNCS, Func("g2", True)), err=errno.EINVAL),
    _c("vc5_global_throw_from_static", "r1 = MAP(rb)\nr2 = 16\nr3 = 0\ncall 131\n"
       "if r0 == 0 goto out\nr9 = r0\ncall st\nr1 = r9\nr2 = 0\ncall 133\nout:\n"
       "r0 = 2\nexit\nst:\ncall sub\nr0 = 0\nexit\nsub:\n" + _GT_THROW, _GT_LEAK,
       funcs=(Func("main"), Func("st"), Func("sub", True)), err=errno.EINVAL),
    _c("vc5_global_throw_iter_leak", "r1 = r10\nr1 += -8\nr2 = 0\nr3 = 3\n"
       "call KFUNC(bpf_iter_num_new)\ncall sub\nr1 = r10\nr1 += -8\n"
       "call KFUNC(bpf_iter_num_destroy)\nr0 = 2\nexit\nsub:\n" + _GT_THROW, _GT_LEAK,
       funcs=_GT_FUNCS, err=errno.EINVAL),
    _c("vc5_global_throw_in_rcu", "call KFUNC(bpf_rcu_read_lock)\ncall sub\n"
       "call KFUNC(bpf_rcu_read_unlock)\nr0 = 2\nexit\nsub:\n" + _GT_THROW,
       "bpf_throw cannot be used inside bpf_rcu_read_lock-ed region", funcs=_GT_FUNCS,
       err=errno.EINVAL),
    _c("vc5_global_throw_no_preempt", "call KFUNC(bpf_preempt_disable)\ncall sub\n"
       "call KFUNC(bpf_preempt_enable)\nr0 = 2\nexit\nsub:\n" + _GT_THROW,
       "bpf_throw cannot be used inside bpf_preempt_disable-ed region", funcs=_GT_FUNCS,
       err=errno.EINVAL),
    _c("vc5_global_throw_in_irq", "r1 = r10\nr1 += -16\ncall KFUNC(bpf_local_irq_save)\n"
       "call sub\nr1 = r10\nr1 += -16\ncall KFUNC(bpf_local_irq_restore)\nr0 = 2\nexit\n"
       "sub:\n" + _GT_THROW, "bpf_throw cannot be used inside bpf_local_irq_save-ed region",
       funcs=_GT_FUNCS, err=errno.EINVAL),
    _c("vc5_global_throw_in_callback", "r1 = 2\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\n"
       "call 181\nr0 = 2\nexit\ncb:\ncall sub\nr0 = 0\nexit\nsub:\n" + _GT_THROW,
       "bpf_throw kfunc (insn 12) cannot be called from callback subprog 2",
       funcs=(Func("main"), Func("cb"), Func("sub", True)), err=errno.EINVAL),
    # (nothing held: the exceptional exit adds no walk)
    _c("vc5_global_throw_twice", "r1 = 5\ncall sub\ncall sub\nr0 = 2\nexit\nsub:\n" +
       _GT_THROW, None, funcs=_GT_FUNCS, processed=7),
    _c("vc5_global_throw_then_error", "r1 = 5\ncall sub\nr0 = *(u64 *)(r1 +0)\nr0 = 2\n"
       "exit\nsub:\n" + _GT_THROW, "R1 !read_ok", funcs=_GT_FUNCS),
    # -- a tail call in a static function (vc5_): check_reference_leak skips every frame
    # but the main one, so the callers' references may be held (not RCU, IRQs, preemption)
    _c("vc5_tail_call_static_ringbuf_held", _TC_HELD.format(
        acq="r1 = MAP(rb)\nr2 = 16\nr3 = 0\ncall 131\nif r0 == 0 goto out\nr9 = r0\n",
        rel="r1 = r9\nr2 = 0\ncall 133\n", sub=_TC_SUB), None, funcs=_TC_FUNCS),
    _c("vc5_tail_call_static_iter_held", _TC_HELD.format(
        acq="r1 = r10\nr1 += -24\nr2 = 0\nr3 = 3\ncall KFUNC(bpf_iter_num_new)\n",
        rel="r1 = r10\nr1 += -24\ncall KFUNC(bpf_iter_num_destroy)\n", sub=_TC_SUB), None,
       funcs=_TC_FUNCS),
    # (the tail call leaves s2 once: its exit to sub is walked, sub goes on; 29 insns)
    _c("vc5_tail_call_nested_static_ringbuf_held", _TC_HELD.format(
        acq="r1 = MAP(rb)\nr2 = 16\nr3 = 0\ncall 131\nif r0 == 0 goto out\nr9 = r0\n",
        rel="r1 = r9\nr2 = 0\ncall 133\n",
        sub="r1 = r6\ncall s2\nr0 = 0\nexit\ns2:\nr6 = r1\n" + _TC_SUB),
       None, funcs=(*_TC_FUNCS, Func("s2", False, ("ctx",))), processed=29),
    # (three calls deep: f3's tail call leaves f3 alone, its unknown R0 to f2, which sets
    # it; then the failed call's path reads R0, which bpf_tail_call (void) left unset)
    _c("vc5_tail_call_three_deep", "r6 = r1\ncall 7\nif r0 > 5 goto +2\nr1 = r6\ncall f1\n"
       "r1 = r10\nr1 += r0\nr0 = 2\nexit\nf1:\nr6 = r1\nr1 = r6\ncall f2\nr1 = r10\n"
       "r1 += r0\nr0 = 0\nexit\nf2:\nr6 = r1\nr1 = r6\ncall f3\nr0 = 0\nexit\nf3:\n"
       "r6 = r1\nr1 = r6\nr2 = MAP(progs)\nr3 = 0\ncall 12\nr1 = r10\nr1 += r0\nr0 = 0\n"
       "exit", "R0 !read_ok",
       funcs=tuple(Func(n, False, ("ctx",)) for n in ("main", "f1", "f2", "f3"))),
    # (check_max_stack_depth: a tail call reachable from a callback, through the functions
    # it calls - statically, dead calls too - is refused; one beside it is not)
    _c("vc5_tail_call_via_callback", "*(u64 *)(r10 -8) = r1\nr1 = 2\nr2 = subprog[cb]\n"
       "r3 = r10\nr3 += -8\nr4 = 0\ncall 181\nr0 = 2\nexit\ncb:\n"
       "r1 = *(u64 *)(r2 +0)\ncall s\nr0 = 0\nexit\ns:\nr2 = MAP(progs)\nr3 = 0\n"
       "call 12\nr0 = 0\nexit", "cannot tail call within callback",
       funcs=(Func("main"), Func("cb"), Func("s")), err=errno.EINVAL),
    _c("vc5_tail_call_via_callback_dead_call", "*(u64 *)(r10 -8) = r1\nr1 = 2\n"
       "r2 = subprog[cb]\nr3 = r10\nr3 += -8\nr4 = 0\ncall 181\nr0 = 2\nexit\ncb:\n"
       "r0 = 0\nif r0 != 0 goto +2\nr0 = 0\nexit\ncall s\nr0 = 0\nexit\ns:\n"
       "r2 = MAP(progs)\nr3 = 0\ncall 12\nr0 = 0\nexit", "cannot tail call within callback",
       funcs=(Func("main"), Func("cb"), Func("s")), err=errno.EINVAL),
    _c("vc5_tail_call_beside_callback", "*(u64 *)(r10 -8) = r1\ncall s\nr1 = 2\n"
       "r2 = subprog[cb]\nr3 = r10\nr3 += -8\nr4 = 0\ncall 181\nr0 = 2\nexit\ncb:\n"
       "r1 = 0\nr0 = 0\nexit\ns:\nr2 = MAP(progs)\nr3 = 0\ncall 12\nr0 = 0\nexit", None,
       funcs=(Func("main"), Func("cb"), Func("s"))),
    _c("vc5_tail_call_static_rcu_held", _TC_HELD.format(
        acq="call KFUNC(bpf_rcu_read_lock)\n", rel="call KFUNC(bpf_rcu_read_unlock)\n",
        sub=_TC_SUB), "tail_call cannot be used inside bpf_rcu_read_lock-ed region",
       funcs=_TC_FUNCS, err=errno.EINVAL),
    _c("vc5_tail_call_main_ringbuf_held", "r6 = r1\nr1 = MAP(rb)\nr2 = 16\nr3 = 0\n"
       "call 131\nif r0 == 0 goto out\nr9 = r0\nr1 = r6\nr2 = MAP(progs)\nr3 = 0\n"
       "call 12\nr1 = r9\nr2 = 0\ncall 133\nout:\nr0 = 2\nexit",
       "tail_call would lead to reference leak", err=errno.EINVAL),
    # -- bpf_throw in a timer's callback (vc5_): with no exception callback its cookie is
    # the return value, held to an async callback's [0, 0] in any frame (then the
    # callback rule of check_max_stack_depth refuses the throw itself)
    _c("vc5_timer_cb_throw_1", _TIMER_CB + "r1 = 1\ncall KFUNC(bpf_throw)\nr0 = 0\nexit",
       "At async callback return the register R1 has smin=1 smax=1 should have been in "
       "[0, 0]", funcs=_CB, err=errno.EINVAL),
    _c("vc5_timer_cb_throw_unknown", _TIMER_CB + "call 7\nr1 = r0\ncall KFUNC(bpf_throw)\n"
       "r0 = 0\nexit", "At async callback return the register R1 has unknown scalar value "
       "should have been in [0, 0]", funcs=_CB, err=errno.EINVAL),
    _c("vc5_timer_cb_throw_0", _TIMER_CB + "r1 = 0\ncall KFUNC(bpf_throw)\nr0 = 0\nexit",
       "bpf_throw kfunc (insn 23) cannot be called from callback subprog 1", funcs=_CB,
       err=errno.EINVAL),
    _c("vc5_timer_cb_throw_1_in_static", _TIMER_CB + "call s\nr0 = 0\nexit\ns:\nr1 = 1\n"
       "call KFUNC(bpf_throw)\nr0 = 0\nexit",
       "At async callback return the register R1 has smin=1 smax=1 should have been in "
       "[0, 0]", funcs=(*_CB, Func("s")), err=errno.EINVAL),
    _c("vc5_timer_cb_throw_1_in_rcu", _TIMER_CB + "call KFUNC(bpf_rcu_read_lock)\nr1 = 1\n"
       "call KFUNC(bpf_throw)\nr0 = 0\nexit",
       "At async callback return the register R1 has smin=1 smax=1 should have been in "
       "[0, 0]", funcs=_CB, err=errno.EINVAL),
    _c("vc5_timer_cb_throw_0_in_rcu", _TIMER_CB + "call KFUNC(bpf_rcu_read_lock)\nr1 = 0\n"
       "call KFUNC(bpf_throw)\nr0 = 0\nexit",
       "bpf_throw cannot be used inside bpf_rcu_read_lock-ed region", funcs=_CB,
       err=errno.EINVAL),
    # -- generic kfuncs in a syscall program (vc5_), checked as in XDP
    _sys("vc5_sys_iter_loop", "r1 = r10\nr1 += -8\nr2 = 0\nr3 = 10\n"
         "call KFUNC(bpf_iter_num_new)\nl:\nr1 = r10\nr1 += -8\ncall KFUNC(bpf_iter_num_next)\n"
         "if r0 == 0 goto d\ngoto l\nd:\nr1 = r10\nr1 += -8\ncall KFUNC(bpf_iter_num_destroy)\n"
         "r0 = 0\nexit", None),
    _sys("vc5_sys_iter_leak", "r1 = r10\nr1 += -8\nr2 = 0\nr3 = 3\n"
         "call KFUNC(bpf_iter_num_new)\nr0 = 0\nexit",
         "BPF_EXIT instruction in main prog would lead to reference leak", err=errno.EINVAL),
    # (a syscall program's return value has no range: nor has the cookie)
    _sys("vc5_sys_throw_wide", "r1 = 0x100000000 ll\ncall KFUNC(bpf_throw)\nr0 = 0\nexit",
         None),
    _sys("vc5_sys_throw_in_rcu", "call KFUNC(bpf_rcu_read_lock)\nr1 = 1\n"
         "call KFUNC(bpf_throw)\nr0 = 0\nexit",
         "bpf_throw cannot be used inside bpf_rcu_read_lock-ed region", err=errno.EINVAL),
    _sys("vc5_sys_rcu_unmatched", "call KFUNC(bpf_rcu_read_unlock)\nr0 = 0\nexit",
         "unmatched rcu read unlock (kernel function bpf_rcu_read_unlock)", err=errno.EINVAL),
    _sys("vc5_sys_preempt_left", "call KFUNC(bpf_preempt_disable)\nr0 = 0\nexit",
         "BPF_EXIT instruction in main prog cannot be used inside bpf_preempt_disable-ed "
         "region", err=errno.EINVAL),
    _sys("vc5_sys_irq_left", "r1 = r10\nr1 += -8\ncall KFUNC(bpf_local_irq_save)\nr0 = 0\n"
         "exit", "BPF_EXIT instruction in main prog cannot be used inside "
         "bpf_local_irq_save-ed region", err=errno.EINVAL),
    _sys("vc5_sys_dynptr_clone_after_discard", _RB_DYNPTR + "r1 = r10\nr1 += -32\n"
         "r2 = r10\nr2 += -48\ncall KFUNC(bpf_dynptr_clone)\nr1 = r10\nr1 += -32\nr2 = 0\n"
         "call 200\nr1 = r10\nr1 += -48\ncall KFUNC(bpf_dynptr_size)\nr0 = 0\nexit",
         "Expected an initialized dynptr as arg #0", err=errno.EINVAL),
    _sys("vc5_sys_dynptr_slice", _RB_DYNPTR + "r1 = r10\nr1 += -32\nr2 = 0\nr3 = 0\n"
         "r4 = 8\ncall KFUNC(bpf_dynptr_slice)\nr1 = r10\nr1 += -32\nr2 = 0\ncall 200\n"
         "r0 = 0\nexit", None),
    # -- prog_flags (vc5_): bits bpf_prog_load does not know are refused before the
    # verifier runs (no log); only some program types may be sleepable; ANY_ALIGNMENT
    # overrides STRICT_ALIGNMENT
    _c("vc5_flags_unknown_bit", "r0 = 2\nexit", "no verifier log", flags=1 << 8,
       err=errno.EINVAL),
    _c("vc5_flags_high_bit", "r0 = 2\nexit", "no verifier log", flags=1 << 31,
       err=errno.EINVAL),
    _c("vc5_flags_token_without_token", "r0 = 2\nexit", "no verifier log", flags=1 << 16,
       err=errno.EINVAL),
    _sys("vc5_flags_sys_unknown_bit", "r0 = 0\nexit", "no verifier log",
         flags=_SLEEPABLE | 1 << 8, err=errno.EINVAL),
    _c("vc5_flags_sleepable_xdp", "r0 = 2\nexit", "Only fentry/fexit/fmod_ret, lsm, iter, "
       "uprobe, and struct_ops programs can be sleepable", flags=_SLEEPABLE, err=errno.EINVAL),
    _c("vc5_flags_dev_bound_without_device", "r0 = 2\nexit", None, flags=1 << 6),
    _c("vc5_flags_strict_and_any_alignment", _PKT + "r4 = r2\nr4 += 8\nif r4 > r3 goto +1\n"
       "r0 = *(u32 *)(r2 +0)\nr0 = 2\nexit", None, flags=3),
    _c("vc5_flags_strict_alignment", _PKT + "r4 = r2\nr4 += 8\nif r4 > r3 goto +1\n"
       "r0 = *(u32 *)(r2 +0)\nr0 = 2\nexit", "misaligned packet access off 2+0+0+0 size 4",
       flags=1),
    # -- the last exit (vc5_): process_bpf_exit_full checks what is held before
    # check_return_code reads R0
    _c("vc5_exit_rcu_r0_unset", "call KFUNC(bpf_rcu_read_lock)\nexit",
       "BPF_EXIT instruction in main prog cannot be used inside bpf_rcu_read_lock-ed region",
       err=errno.EINVAL),
    _c("vc5_exit_spin_lock_r0_unset", "*(u32 *)(r10 -4) = 0\nr2 = r10\nr2 += -4\n"
       "r1 = MAP(locked)\ncall 1\nif r0 == 0 goto +4\nr1 = r0\nr1 += 4\ncall 93\nexit\n"
       "r0 = 2\nexit",
       "BPF_EXIT instruction in main prog cannot be used inside bpf_spin_lock-ed region",
       err=errno.EINVAL),
    _c("vc5_exit_global_rcu_r0_pointer", "call g\nr0 = 2\nexit\ng:\n"
       "call KFUNC(bpf_rcu_read_lock)\nr0 = r10\nexit",
       "BPF_EXIT instruction in main prog cannot be used inside bpf_rcu_read_lock-ed region",
       funcs=(Func("main"), Func("g", True)), err=errno.EINVAL),
    _c("vc5_exit_timer_cb_irq_saved", _TIMER_CB + "r1 = r10\nr1 += -8\n"
       "call KFUNC(bpf_local_irq_save)\nr0 = 2\nexit",
       "BPF_EXIT instruction in main prog cannot be used inside bpf_local_irq_save-ed region",
       funcs=_CB, err=errno.EINVAL),
    # -- bpf_throw under a callback (vc5_): check_max_stack_depth walks the async callbacks
    # first, the last one first, then main (whose loop callback throws only in dead code)
    _c("vc5_throw_async_root_first", "r1 = 2\nr2 = subprog[f1]\nr3 = 0\nr4 = 0\ncall 181\n" +
       _TIMER_CB.replace("subprog[cb]", "subprog[f2]").split("cb:")[0] + "f1:\nr0 = 2\n"
       "if r0 == 2 goto +2\nr1 = 0\ncall KFUNC(bpf_throw)\ncall f2\nr0 = 0\nexit\nf2:\n"
       "r1 = 0\ncall KFUNC(bpf_throw)\nr0 = 0\nexit",
       "bpf_throw kfunc (insn 36) cannot be called from callback subprog 2",
       funcs=(Func("main"), Func("f1"), Func("f2")), err=errno.EINVAL),
    # (a function is a callback where a reached call pushed it: here none is)
    _c("vc5_throw_callback_never_pushed", "r1 = 0\ncall KFUNC(bpf_throw)\n" +
       _LOOP.format(cb="r1 = 0\ncall KFUNC(bpf_throw)\nr0 = 0"), None, funcs=_CB),
    _c("vc5_throw_timer_callback_never_set", "r1 = 0\ncall KFUNC(bpf_throw)\n" + _TIMER_CB +
       "r1 = 0\ncall KFUNC(bpf_throw)\nr0 = 0\nexit", None, funcs=_CB),
    _c("vc5_throw_dead_in_pushed_callback", _LOOP.format(
        cb="r0 = 2\nif r0 == 2 goto +2\nr1 = 0\ncall KFUNC(bpf_throw)\nr0 = 0"),
       "bpf_throw kfunc (insn 11) cannot be called from callback subprog 1", funcs=_CB,
       err=errno.EINVAL),
    # -- a syscall program's global functions (vc5_): its context is void *, so a
    # struct xdp_md * argument is memory like any struct's (NULL allowed), and its context
    # may be passed as zero bytes of memory
    _sys("vc5_sys_global_xdp_md_null", "r1 = 0\ncall fn\nr0 = 0\nexit\nfn:\nr0 = 0\nexit",
         None, funcs=(Func("main", True, ("ctx",)), Func("fn", True, ("ctx",)))),
    _sys("vc5_sys_global_xdp_md_unchecked", "call fn\nr0 = 0\nexit\nfn:\n"
         "r0 = *(u64 *)(r1 +0)\nr0 = 0\nexit", "R1 invalid mem access 'mem_or_null'",
         funcs=(Func("main", True, ("ctx",)), Func("fn", True, ("ctx",)))),
    _sys("vc5_sys_global_mem0_ctx", "call fn\nr0 = 0\nexit\nfn:\nr0 = 0\nexit", None,
         funcs=_G0),
    # -- networking kfuncs in a syscall program (vc5_): refused where reached
    _sys("vc5_sys_dynptr_from_xdp", "call KFUNC(bpf_dynptr_from_xdp)\nr0 = 0\nexit",
         "calling kernel function bpf_dynptr_from_xdp is not allowed"),
    _sys("vc5_sys_xdp_ct_lookup_dead", "r0 = 0\nif r0 == 0 goto +1\n"
         "call KFUNC(bpf_xdp_ct_lookup)\nr0 = 0\nexit", None),
    _sys("vc5_sys_ct_release", "call KFUNC(bpf_ct_release)\nr0 = 0\nexit",
         "calling kernel function bpf_ct_release is not allowed"),
    _sys("vc5_sys_xdp_pull_data", "call KFUNC(bpf_xdp_pull_data)\nr0 = 0\nexit",
         "calling kernel function bpf_xdp_pull_data is not allowed"),
    _sys("vc5_sys_metadata_kfunc", "r0 = 0\nif r0 == 0 goto +1\n"
         "call KFUNC(bpf_xdp_metadata_rx_hash)\nr0 = 0\nexit",
         "metadata kfuncs require device-bound program", err=errno.EINVAL),
)

# Linux 6.18's walk of each program of tests/verifier_objects/loops2.o (clang-19 output of
# cond_break, can_loop, bpf_for, bpf_repeat and bpf_loop): the instructions processed when
# accepted, the last line of the log and the errno when refused.
_JMP_SEQ_ENOMEM = (_JMP_SEQ_LINE, errno.ENOMEM)
LOOPS2_WALKS: dict[str, int | tuple[str, int]] = {
    "it_map_sum": 84, "it_repeat": 117, "it_nested": 221, "cl_chase": _JMP_SEQ_ENOMEM,
    "bl_sum": 96, "it_cond_break": 101, "cl_scan": _JMP_SEQ_ENOMEM,
    "it_map_bound": (_JMP_SEQ_LINE, errno.EFAULT), "cl_subprog": 324, "it_pkt": 124,
    "bl_nested_cb": 245, "it_ipv6_ext": ("R6 offset is outside of the packet", errno.EACCES),
    "cl_countdown": 47, "it_empty": 16}
