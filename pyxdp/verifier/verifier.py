"""The eBPF verifier for XDP programs: ``kernel/bpf/verifier.c`` as root runs it.

An abstract interpreter walks every path of the program from its first
instruction, as ``do_check`` does, keeping for every register a
``struct bpf_reg_state``: its type (scalar, context, packet, packet end,
packet meta, map pointer, map value (or NULL), stack, ringbuf memory (or
NULL), function) and for scalars and variable offsets a tnum with signed
and unsigned 64- and 32-bit bounds. The stack of each call frame is kept per
8-byte slot (spilled register, misc, zero, invalid). Conditional jumps
refine both outcomes (``reg_set_min_max``), NULL checks turn every copy of
a pointer (same id) non-NULL or zero, and comparing a packet pointer with
``data_end`` marks the range of every pointer of its id
(``find_good_pkt_pointers``). Helper calls are checked against their
prototypes (:mod:`pyxdp.verifier.helpers`), kfunc calls against theirs
(:mod:`pyxdp.verifier.kfuncs`: dynptrs in stack slots, slices, acquired and
released references); static bpf-to-bpf calls get a frame, global functions
are verified once on their own from their BTF prototypes
(``do_check_subprogs``). ``bpf_spin_lock``, ``bpf_timer`` and ``bpf_wq``
follow the fields of the map value (from the map's BTF; a timer's or work
item's callback is verified on its own); ``BPF_F_STRICT_ALIGNMENT`` checks
alignment as Linux does with it. A program with CO-RE relocations is
verified as relocated. States at jump targets are kept and a path reaching a
state another path already verified as safe stops there
(``is_state_visited``); an equal state on the current path is an infinite
loop. Loops Linux verifies until they converge do so here too: open-coded
iterators (``process_iter_next_call``), ``may_goto`` and callbacks
(``bpf_loop``, ``bpf_for_each_map_elem``, which return to their call) stop
at a state within one of an earlier iteration, after widening the scalars no
path needed exactly (``widen_imprecise_scalars``). More than 1,000,000
processed instructions refuse the program.

A refusal raises :class:`~pyxdp.errors.VerifierError` whose last log line is
the line Linux 6.18 prints for the same failure. What differs from Linux is
listed in docs/SEMANTICS.md.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import gc
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pyxdp.asm import opcodes as op
from pyxdp.asm.disasm import format_insn
from pyxdp.asm.helpers_names import HELPER_NAMES, PYXDP_HELPER_NAMES
from pyxdp.asm.insn import Instruction, imm64_at
from pyxdp.asm.validate import Layout, jump_target, validate
from pyxdp.btf.btf import SPECIAL_FIELDS, Btf, BtfKind, BtfType, FieldError
from pyxdp.btf.core import POISON_HELPER, CoreRelocationError, apply_core_relos
from pyxdp.btf.kcheck import kernel_error
from pyxdp.btf.struct_access import (
    StructWalkError,
    btf_resolve_size,
    member_offset,
    skip_modifiers,
    struct_access,
)
from pyxdp.btf.vmlinux import BtfIndex, core_target
from pyxdp.errors import (
    InvalidProgram,
    NotSupportedError,
    ObjectError,
    UnsupportedHelper,
    VerifierError,
)
from pyxdp.spec import (
    BPF_F_RDONLY_PROG,
    BPF_F_WRONLY_PROG,
    BPF_F_XDP_DEV_BOUND_ONLY,
    BPF_XDP_DEVMAP,
    ExceptionCallbackError,
    MapRef,
    MapSpec,
    ProgramSpec,
    exception_callback,
)
from pyxdp.uapi.bpf import BpfMapType as MT
from pyxdp.verifier.facts import AccessFacts, MemAccess
from pyxdp.verifier.fields import linux_fields
from pyxdp.verifier.helpers import (
    MIGHT_SLEEP_HELPERS,
    PKT_ACCESS,
    PROTOS,
    SLEEPABLE_MAPS,
    SYSCALL_HELPERS,
    SYSCALL_MODELLED,
    UNMODELLED_XDP_HELPERS,
    Arg,
    Ret,
    bpf_sock_is_valid_access,
    bprintf_ok,
    func_maps,
)
from pyxdp.verifier.kfuncs import (
    CSS_TASK_ITER,
    KERNEL_KPTRS,
    KF_ACQUIRE,
    KF_ITER_DESTROY,
    KF_ITER_NEW,
    KF_ITER_NEXT,
    KF_RCU,
    KF_RCU_PROTECTED,
    KF_RELEASE,
    KF_RET_NULL,
    KF_TRUSTED_ARGS,
    KFUNCS,
    KPTR_DTORS,
    NOT_FOR_SYSCALL,
    NOT_FOR_XDP,
    RCU_FIELDS,
    RCU_PROTECTED_TYPES,
    SLEEPABLE_KFUNCS,
    THROW_KFUNC,
    TRAP_KFUNC,
    KArg,
    KfuncProto,
    KParam,
    KRet,
    syscall_verified,
)
from pyxdp.verifier.liveness import StackLiveness
from pyxdp.verifier.tnum import (
    U64,
    Tnum,
    t_add,
    t_and,
    t_arshift,
    t_bswap,
    t_in,
    t_intersect,
    t_lshift,
    t_mul,
    t_or,
    t_range,
    t_rshift,
    t_step,
    t_sub,
    t_xor,
    tnum_str,
)

__all__ = ["BPF_COMPLEXITY_LIMIT_INSNS", "VerifierResult", "btf_load_refusal", "verify"]

BPF_COMPLEXITY_LIMIT_INSNS = 1_000_000
BPF_F_STRICT_ALIGNMENT = 1 << 0  # prog_flags
BPF_F_ANY_ALIGNMENT = 1 << 1  # overrides BPF_F_STRICT_ALIGNMENT
BPF_F_SLEEPABLE = 1 << 4
# the prog_flags bpf_prog_load knows (BPF_F_TOKEN_FD aside: pyxdp passes no BPF token)
_PROG_FLAGS = 0xFF
BPF_F_TEST_REG_INVARIANTS = 1 << 7  # impossible bounds refused (-EFAULT)
# syscall_prog_is_valid_access: a context of up to U16_MAX bytes, any access size
_SYSCALL_CTX_MAX = 0xFFFF
BPF_COMPLEXITY_LIMIT_JMP_SEQ = 8192
MAX_BPF_STACK = 512
MAX_CALL_FRAMES = 8
LINKED_REGS_MAX = 6
# A scalar's id flags: it went through ``rX += const`` (32- or 64-bit) after being linked
# to its copies, ``off`` holding the constant (BPF_ADD_CONST32/64 of Linux's reg->id).
BPF_ADD_CONST32, BPF_ADD_CONST64 = 1 << 30, 1 << 31
BPF_ADD_CONST = BPF_ADD_CONST32 | BPF_ADD_CONST64
BPF_MAX_VAR_OFF = 1 << 29
BPF_MAX_VAR_SIZ = 1 << 29
MAX_PACKET_OFF = 0xFFFF
# A packet pointer's range once compared beyond (or at) data_end: any access fails.
_AT_PKT_END, _BEYOND_PKT_END = -1, -2
U32 = 0xFFFF_FFFF
S64_MIN, S64_MAX = -(1 << 63), (1 << 63) - 1
S32_MIN, S32_MAX = -(1 << 31), (1 << 31) - 1

# enum bpf_reg_type (base types) and the flags pyxdp meets.
NOT_INIT, SCALAR, CTX, MAP_PTR, MAP_VALUE, MAP_KEY, STACK, PKT_META, PKT, PKT_END, MEM, FUNC, \
    BTF_ID, DYNPTR, ITER, SOCK, SOCK_COMMON = range(17)
# SOCK, SOCK_COMMON: PTR_TO_SOCKET, PTR_TO_SOCK_COMMON (struct bpf_sock of a socket lookup).
# DYNPTR is CONST_PTR_TO_DYNPTR: a global function's dynptr argument in a register (``sub``
# its dynptr type), and the register of a dynptr's stack slots (``off`` 1 in the first).
# Flags: MEM_RDONLY, PTR_MAYBE_NULL, MEM_RINGBUF; PKT_SLICE stands for a slice of a packet
# dynptr (a dynptr_id of an XDP dynptr: packet-changing helpers invalidate it).
MAYBE_NULL, RINGBUF, RDONLY, PKT_SLICE = 0x100, 0x200, 0x400, 0x800
# PTR_TRUSTED: a PTR_TO_BTF_ID the kernel vouches for (a global function's __arg_trusted
# argument, bpf_cast_to_kern_ctx's); PTR_UNTRUSTED: a kernel pointer read through probe
# loads (bpf_rdonly_cast's, or one walked from it)
TRUSTED, UNTRUSTED = 0x1000, 0x2000
# MEM_ALLOC: a PTR_TO_BTF_ID to an object of a program's own struct (bpf_obj_new's; ``sub``
# its id in the program's BTF); MEM_RCU: one read from a map value's __kptr field
ALLOC, RCU = 0x4000, 0x8000
# NON_OWN_REF: an object on a list, which the program may use until it unlocks the list's
# bpf_spin_lock (invalidate_non_owning_refs); it holds no reference
NON_OWN = 0x10000
# MEM_PERCPU: a per-CPU object (bpf_percpu_obj_new's, or a __percpu_kptr read from a map
# value): no access but through bpf_this_cpu_ptr/bpf_per_cpu_ptr
PERCPU = 0x20000
# BPF_GLOBAL_PERCPU_MA_MAX_SIZE: the largest struct bpf_percpu_obj_new allocates
_PERCPU_OBJ_MAX = 512
BPF_FUNC_PER_CPU_PTR, BPF_FUNC_THIS_CPU_PTR = 153, 154
# btf_field_type_name where it is not the field's name in SPECIAL_FIELDS
_FIELD_NAMES = {"kptr_untrusted": "kptr"}
# Special fields beyond SPECIAL_FIELDS (btf_parse_fields: graph roots and nodes, refcount,
# task work) that a program-allocated object may hold
_OBJ_SPECIAL = frozenset({"bpf_task_work", "bpf_list_head", "bpf_list_node", "bpf_rb_root",
                          "bpf_rb_node", "bpf_refcount"})
# ... but for these (a refcounted graph node; a graph root beside the object's own lock)
_OBJ_MODELLED = frozenset({"bpf_list_node", "bpf_rb_node", "bpf_refcount", "bpf_list_head",
                           "bpf_rb_root", "bpf_spin_lock"})
# The owner State.locks names for a lock in a program-allocated object (Linux keys it by
# the program's BTF, one per program; no map is named so)
_OBJ_LOCK = "\0bpf_obj"
BPF_FUNC_KPTR_XCHG = 194
_TYPE_STR = {NOT_INIT: "?", SCALAR: "scalar", CTX: "ctx", MAP_PTR: "map_ptr",
             MAP_VALUE: "map_value", MAP_KEY: "map_key", STACK: "fp", PKT_META: "pkt_meta",
             PKT: "pkt", PKT_END: "pkt_end", MEM: "mem", FUNC: "func", BTF_ID: "ptr_",
             DYNPTR: "dynptr_ptr", ITER: "iter", SOCK: "sock", SOCK_COMMON: "sock_common"}
# Stack byte kinds (enum bpf_stack_slot_type).
S_INVALID, S_SPILL, S_MISC, S_ZERO, S_DYNPTR, S_ITER, S_IRQ = 0, 1, 2, 3, 4, 5, 6
# The kfuncs whose calls the verifier pairs (active_rcu_lock, active_preempt_locks).
_RCU_PREEMPT = frozenset({"bpf_rcu_read_lock", "bpf_rcu_read_unlock", "bpf_preempt_disable",
                          "bpf_preempt_enable"})
# enum ref_state_type's lock kinds: what State.locks holds, in the order taken
REF_TYPE_LOCK, REF_TYPE_RES_LOCK, REF_TYPE_RES_LOCK_IRQ = 1 << 3, 1 << 4, 1 << 5
_RES_LOCKS = REF_TYPE_RES_LOCK | REF_TYPE_RES_LOCK_IRQ
REF_TYPE_LOCK_MASK = REF_TYPE_LOCK | _RES_LOCKS
# process_spin_lock's flags
_PROCESS_SPIN_LOCK, _PROCESS_RES_LOCK, _PROCESS_LOCK_IRQ = 1, 2, 4
_RES_LOCK_KFUNCS = {"bpf_res_spin_lock": _PROCESS_RES_LOCK | _PROCESS_SPIN_LOCK,
                    "bpf_res_spin_unlock": _PROCESS_RES_LOCK,
                    "bpf_res_spin_lock_irqsave": _PROCESS_RES_LOCK | _PROCESS_SPIN_LOCK |
                    _PROCESS_LOCK_IRQ,
                    "bpf_res_spin_unlock_irqrestore": _PROCESS_RES_LOCK | _PROCESS_LOCK_IRQ}
# is_bpf_list_api_kfunc: the graph kfuncs pyxdp models (the locked list's own)
_LIST_KFUNCS = frozenset({"bpf_list_push_front_impl", "bpf_list_push_back_impl",
                          "bpf_list_pop_front", "bpf_list_pop_back", "bpf_list_front",
                          "bpf_list_back"})
# is_bpf_rbtree_api_kfunc: the tree's (is_rbtree_lock_required_kfunc: all of them)
_RBTREE_KFUNCS = frozenset({"bpf_rbtree_add_impl", "bpf_rbtree_remove", "bpf_rbtree_first",
                            "bpf_rbtree_root", "bpf_rbtree_left", "bpf_rbtree_right"})
_RBTREE_ADD = "bpf_rbtree_add_impl"
# kfunc_spin_allowed: the kfuncs a program may call while it holds a lock
_SPIN_ALLOWED_KFUNCS = frozenset({*_RES_LOCK_KFUNCS, *_LIST_KFUNCS, *_RBTREE_KFUNCS,
                                  "bpf_refcount_acquire_impl",
                                  "bpf_iter_num_new", "bpf_iter_num_next",
                                  "bpf_iter_num_destroy"})
# irq.kfunc_class of a STACK_IRQ_FLAG slot: which pair saved it (kept in the slot's ``sub``)
IRQ_NATIVE_KFUNC, IRQ_LOCK_KFUNC = 0, 1
_IRQ_SAVE = {"bpf_local_irq_save": IRQ_NATIVE_KFUNC, "bpf_res_spin_lock_irqsave": IRQ_LOCK_KFUNC}
_IRQ_CLASS = {"bpf_local_irq_save": IRQ_NATIVE_KFUNC, "bpf_local_irq_restore": IRQ_NATIVE_KFUNC,
              "bpf_res_spin_lock_irqsave": IRQ_LOCK_KFUNC,
              "bpf_res_spin_unlock_irqrestore": IRQ_LOCK_KFUNC}
MAX_ERRNO = 4095
_SPECIAL_SLOTS = (S_DYNPTR, S_ITER, S_IRQ)  # no load may read them as data
_IRQ_SLOT = bytes([S_IRQ] * 8)  # STACK_IRQ_FLAG: the slot's register holds the IRQ id (ref)
# An iterator slot's register (``spilled_ptr``): ``ref`` its reference, ``sub`` its
# state, ``rng`` its depth (iterations begun), ``bt`` its kind ("num").
ITER_ACTIVE, ITER_DRAINED = 1, 2
# State.hist entries: the pc, and for a fixed-offset stack access which slot it touched.
_HIST_PC = (1 << 20) - 1
_HIST_STACK = 1 << 20

# struct bpf_sock: what a sock_common may not read (bpf_sock_common_is_valid_access)
_BPF_SOCK_TYPE, _BPF_SOCK_SRC_IP4 = 8, 24

# struct xdp_md
XDP_MD_SIZE = 24
_CTX_PTRS = {0: PKT, 4: PKT_END, 8: PKT_META}
_EGRESS_IFINDEX = 20


def type_str(t: int) -> str:
    got = _TYPE_STRS.get(t)
    if got is None:
        got = _TYPE_STRS[t] = _type_str(t)
    return got


_TYPE_STRS: dict[int, str] = {}  # type_str's answers (a type's string is asked per access)


def _type_str(t: int) -> str:
    pre = ("rdonly_" if t & RDONLY else "") + ("ringbuf_" if t & RINGBUF else "") + (
        "percpu_" if t & PERCPU else "") + ("rcu_" if t & RCU else "") + (
        "untrusted_" if t & UNTRUSTED else "") + ("trusted_" if t & TRUSTED else "")
    if t & 0xFF == BTF_ID:  # reg_type_str: "ptr_or_null_"
        return pre + ("ptr_or_null_" if t & MAYBE_NULL else "ptr_")
    post = "_or_null" if t & MAYBE_NULL else ""
    return pre + _TYPE_STR[t & 0xFF] + post


def _reg_not_null(r: Reg) -> bool:
    """reg_not_null: pointers known never to be NULL - unless an offset that may reach
    2^29 could wrap one to 0. A referenced or PTR_TRUSTED PTR_TO_BTF_ID is trusted."""
    if r.t & MAYBE_NULL or r.smin <= -BPF_MAX_VAR_OFF or r.smax >= BPF_MAX_VAR_OFF:
        return False
    base = r.t & 0xFF
    if base == MEM:
        return not r.t & UNTRUSTED
    return base in (MAP_VALUE, MAP_KEY, MAP_PTR, SOCK, SOCK_COMMON) or (
        base == BTF_ID and bool(r.ref or r.t & TRUSTED and not r.t & UNTRUSTED))


# reg_type_mismatch_ok's exceptions: pointers whose loads and stores are rewritten per
# type, so one instruction may not meet two kinds of them
_REWRITTEN_PTRS = frozenset({CTX, SOCK, SOCK_COMMON, BTF_ID})
# reg2btf_ids: the registers a kfunc's struct pointer argument takes besides PTR_TO_BTF_ID,
# as pointers to these kernel structs
_REG2BTF = {MAP_PTR: "bpf_map", SOCK: "sock", SOCK_COMMON: "sock_common"}
# A program type's context struct named by a kfunc of another type (the skb conntrack
# kfuncs' struct __sk_buff): Linux 6.18 takes any register for it as a kernel-object
# argument, so a non-trusted one is "must be referenced or trusted" (measured from XDP
# with the context, stack, packet and map value pointers), never "must point to scalar".
_SKB_CTX = frozenset({"__sk_buff"})


def _is_trusted_reg(reg: Reg) -> bool:
    """is_trusted_reg: referenced, a socket or map pointer (reg2btf_ids) without flags,
    or PTR_TRUSTED and no other flag (MAYBE_NULL included)."""
    base, flags = reg.t & 0xFF, reg.t & ~0xFF
    return bool(reg.ref) or (base in (SOCK, SOCK_COMMON, MAP_PTR) and not flags) or \
        flags == TRUSTED


def _is_rcu_reg(reg: Reg) -> bool:
    """is_rcu_reg: MEM_RCU (a pointer valid until the RCU read section ends)."""
    return bool(reg.t & RCU)


def _released_ref(n: int, reg: Reg) -> int:
    """check_release_arg: the reference a release argument gives back (it must hold one)."""
    if not reg.ref:
        raise Refuse(f"R{n} must be referenced when passed to release function", errno.EINVAL)
    return reg.ref


def _stack_oob_errno(lo: int) -> int:
    """check_stack_access_within_bounds: an access starting outside the stack is -EACCES,
    one starting inside it and running into non-negative offsets -EINVAL."""
    return errno.EACCES if lo < -MAX_BPF_STACK or lo >= 0 else errno.EINVAL


def _stack_var_bounded(regno: int, reg: Reg, write: bool) -> None:
    """check_stack_access_within_bounds: a variable stack offset whose signed bounds reach
    BPF_MAX_VAR_OFF is refused before its range is compared with the stack's."""
    if reg.smax >= BPF_MAX_VAR_OFF or reg.smin <= -BPF_MAX_VAR_OFF:
        kind = "write to" if write else "read from"
        raise Refuse(f"invalid unbounded variable-offset {kind} stack R{regno}")


def _s64(v: int) -> int:
    v &= U64
    return v - (1 << 64) if v >> 63 else v


def _s32(v: int) -> int:
    v &= U32
    return v - (1 << 32) if v >> 31 else v


def _tn(r: Reg) -> str:
    """tnum_strn: a known value prints as the number."""
    return str(_s64(r.tv)) if r.tm == 0 else tnum_str((r.tv, r.tm))


def _not_kfunc(kernel: BtfIndex, func_id: int) -> bool:
    """Whether a kernel BTF that tags its kfuncs (``bpf_kfunc`` decl tags, pahole's
    decl_tag_kfuncs) leaves function ``func_id`` untagged: no kfunc, for any program."""
    tags = kernel.find_all("bpf_kfunc")
    return bool(tags) and all(kernel.type_by_id(t).size_type != func_id for t in tags)


_GPL_LICENSES = frozenset({"GPL", "GPL v2", "GPL and additional rights", "Dual BSD/GPL",
                           "Dual MIT/GPL", "Dual MPL/GPL"})  # license_is_gpl_compatible


class Refuse(Exception):
    """One refusal: the log line Linux prints (``msg``), its errno."""

    def __init__(self, msg: str, err: int = errno.EACCES, *, glued: bool = False) -> None:
        super().__init__(msg)
        self.msg = msg
        self.err = err
        self.glued = glued


_NOT_INIT_KEY: tuple[object, ...] = (NOT_INIT,) + (0,) * 19


class _Memo(dict[tuple[int, ...], tuple[int, ...]]):
    """A scalar's value (:meth:`Reg.scalar`) after a pure function of values met again
    and again, by the function's inputs; emptied when full (programs reuse few)."""

    def put(self, key: tuple[int, ...], value: tuple[int, ...]) -> None:
        if len(self) >= 1 << 16:
            self.clear()
        self[key] = value


_SYNCED = _Memo()  # reg_bounds_sync, by the tnum and bounds
_COERCED = _Memo()  # Reg.coerce, by the size, tnum and bounds
_SCALAR_OPS = _Memo()  # a scalar ALU operation, by the operation and both operands


class Reg:
    """``struct bpf_reg_state``."""

    __slots__ = ("t", "off", "id", "ref", "rng", "map", "msize", "frame", "tv", "tm",
                 "smin", "smax", "umin", "umax", "s32min", "s32max", "u32min", "u32max",
                 "sub", "bt", "precise")

    def __init__(self) -> None:
        self.t = NOT_INIT
        self.precise = False  # mark_chain_precision: pruning compares this scalar's value
        self.off = 0
        self.id = 0
        self.ref = 0
        self.rng = 0
        self.map: MapSpec | None = None
        self.msize = 0
        self.frame = 0
        self.sub = 0  # PTR_TO_FUNC: the callee's pc; a dynptr slot: its dynptr's type
        self.bt = ""  # PTR_TO_BTF_ID: the kernel struct's name
        self.unknown()

    def unknown(self) -> None:
        self.tv, self.tm = 0, U64
        self.smin, self.smax, self.umin, self.umax = S64_MIN, S64_MAX, 0, U64
        self.s32min, self.s32max, self.u32min, self.u32max = S32_MIN, S32_MAX, 0, U32

    def copy(self) -> Reg:
        # field by field: the verifier's most frequent operation (states are copied whole)
        r = _new_reg(Reg)
        r.t = self.t
        r.off = self.off
        r.id = self.id
        r.ref = self.ref
        r.rng = self.rng
        r.map = self.map
        r.msize = self.msize
        r.frame = self.frame
        r.tv = self.tv
        r.tm = self.tm
        r.sub = self.sub
        r.bt = self.bt
        r.smin = self.smin
        r.smax = self.smax
        r.umin = self.umin
        r.umax = self.umax
        r.s32min = self.s32min
        r.s32max = self.s32max
        r.u32min = self.u32min
        r.u32max = self.u32max
        r.precise = self.precise
        return r

    def assign(self, o: Reg) -> None:
        self.t = o.t
        self.off = o.off
        self.id = o.id
        self.ref = o.ref
        self.rng = o.rng
        self.map = o.map
        self.msize = o.msize
        self.frame = o.frame
        self.tv = o.tv
        self.tm = o.tm
        self.sub = o.sub
        self.bt = o.bt
        self.smin = o.smin
        self.smax = o.smax
        self.umin = o.umin
        self.umax = o.umax
        self.s32min = o.s32min
        self.s32max = o.s32max
        self.u32min = o.u32min
        self.u32max = o.u32max
        self.precise = o.precise

    def key(self) -> tuple[object, ...]:
        """Every field, for exact comparison (``regs_exact``); ids at 2 and 3."""
        if self.t == NOT_INIT:
            return _NOT_INIT_KEY
        return (self.t, self.off, self.id, self.ref, self.rng,
                self.map.name if self.map is not None else None, self.msize, self.frame,
                self.tv, self.tm, self.smin, self.smax, self.umin, self.umax, self.s32min,
                self.s32max, self.u32min, self.u32max, self.sub, self.bt)

    # -- constructors -------------------------------------------------------------------
    def set_unknown(self) -> None:
        self.assign(_UNKNOWN_SCALAR)

    def set_known(self, v: int) -> None:
        self.assign(_known_template(v))

    def known32(self, v: int) -> None:
        """__mark_reg32_known: the subregister is ``v``; the 64-bit bounds stay."""
        self.tv = (self.tv & ~U32 & U64) | (v & U32)
        self.tm &= ~U32 & U64
        self.s32min = self.s32max = _s32(v)
        self.u32min = self.u32max = v & U32

    def set_ptr(self, t: int, off: int = 0) -> None:
        self.__init__()  # type: ignore[misc]
        self.t = t
        self.off = off
        self.set_var_zero()

    def set_var_zero(self) -> None:
        self.tv, self.tm = 0, 0
        self.smin = self.smax = self.umin = self.umax = 0
        self.s32min = self.s32max = self.u32min = self.u32max = 0

    # -- facts --------------------------------------------------------------------------
    @property
    def const(self) -> bool:
        # (the hottest paths test ``tm == 0`` themselves: a property costs a call)
        return self.tm == 0

    def is_null(self) -> bool:
        return self.t == SCALAR and self.tm == 0 and self.tv == 0

    def sub_const(self) -> bool:
        return self.tm & U32 == 0

    def is_pkt(self) -> bool:
        return self.t in (PKT, PKT_META)

    def unbounded(self) -> bool:
        return self.tm == U64

    # -- bounds (reg_bounds_sync) --------------------------------------------------------
    def sync(self) -> None:
        if self.tm == 0:  # a known value: every bound is the value
            v = self.tv
            self.smin = self.smax = _s64(v)
            self.umin = self.umax = v
            self.s32min = self.s32max = _s32(v)
            self.u32min = self.u32max = v & U32
            return
        # a pure function of the tnum and the bounds, met again and again: remembered
        key = self.scalar()
        got = _SYNCED.get(key)
        if got is not None:
            self.set_scalar(got)
            return
        self._update()
        before = self.scalar()
        self._deduce()
        if before != self.scalar():
            # Linux's three rounds: a round can only learn from what the one before changed
            before = self.scalar()
            self._deduce()
            if before != self.scalar():
                self._deduce()
        self._bound_offset()
        self._update()
        _SYNCED.put(key, self.scalar())

    def sync_raw(self) -> None:
        """reg_bounds_sync step by step, for bounds a dead branch may have made impossible
        (``sync`` takes a known tnum's value for every bound)."""
        self._update()
        self._deduce()
        self._deduce()
        self._deduce()
        self._bound_offset()
        self._update()

    def possible(self) -> bool:
        """Whether ``sync`` may take its shortcuts: every range well formed, a known tnum's
        value in each."""
        if self.tm:
            return self.umin <= self.umax and self.smin <= self.smax and \
                self.u32min <= self.u32max and self.s32min <= self.s32max
        v = self.tv
        return self.umin <= v <= self.umax and self.smin <= _s64(v) <= self.smax and \
            self.u32min <= v & U32 <= self.u32max and self.s32min <= _s32(v) <= self.s32max

    def invariants_violation(self) -> str | None:
        """reg_bounds_sanity_check: what is impossible in these bounds, or None."""
        if self.umin > self.umax or self.smin > self.smax or self.u32min > self.u32max or \
                self.s32min > self.s32max:
            return "range bounds violation"
        v = self.tv
        if self.tm == 0 and not (self.umin == self.umax == v and
                                 self.smin == self.smax == _s64(v)):
            return "const tnum out of sync with range bounds"
        v &= U32
        if self.tm & U32 == 0 and not (self.u32min == self.u32max == v and
                                       self.s32min == self.s32max == _s32(v)):
            return "const subreg tnum out of sync with range bounds"
        return None

    def bounds_str(self) -> str:
        """The bounds as REG INVARIANTS VIOLATION prints them."""
        return (f"u64=[{self.umin:#x}, {self.umax:#x}] s64=[{self.smin & U64:#x}, "
                f"{self.smax & U64:#x}] u32=[{self.u32min:#x}, {self.u32max:#x}] "
                f"s32=[{self.s32min & U32:#x}, {self.s32max & U32:#x}] "
                f"var_off=({self.tv:#x}, {self.tm:#x})")

    def unbound(self) -> None:
        """__mark_reg_unbounded: every range the widest, the tnum kept."""
        self.smin, self.smax, self.umin, self.umax = S64_MIN, S64_MAX, 0, U64
        self.s32min, self.s32max, self.u32min, self.u32max = S32_MIN, S32_MAX, 0, U32

    def scalar(self) -> tuple[int, ...]:
        """The scalar's value: its tnum and bounds."""
        return (self.tv, self.tm, self.smin, self.smax, self.umin, self.umax, self.s32min,
                self.s32max, self.u32min, self.u32max)

    def set_scalar(self, v: tuple[int, ...]) -> None:
        self.tv, self.tm, self.smin, self.smax, self.umin, self.umax, self.s32min, \
            self.s32max, self.u32min, self.u32max = v

    def _update(self) -> None:
        v, m = self.tv, self.tm
        v32, m32 = v & U32, m & U32
        x = v32 | (m32 & 0x8000_0000)
        x = x - (1 << 32) if x >> 31 else x
        if x > self.s32min:
            self.s32min = x
        x = v32 | (m32 & 0x7FFF_FFFF)
        x = x - (1 << 32) if x >> 31 else x
        if x < self.s32max:
            self.s32max = x
        if v32 > self.u32min:
            self.u32min = v32
        if v32 | m32 < self.u32max:
            self.u32max = v32 | m32
        x = v | (m & (1 << 63))
        x = x - (1 << 64) if x >> 63 else x
        if x > self.smin:
            self.smin = x
        x = v | (m & S64_MAX)
        x = x - (1 << 64) if x >> 63 else x
        if x < self.smax:
            self.smax = x
        if v > self.umin:
            self.umin = v
        if v | m < self.umax:
            self.umax = v | m
        # The u64 range meeting the tnum in a single value makes it known (tnum_step).
        umin, umax, tmax = self.umin, self.umax, v | m
        nxt = t_step((v, m), umin)
        if (umin & ~m) == v:
            if nxt > umax:
                self._known(umin)
        elif nxt == tmax:
            self._known(tmax)
        elif nxt <= umax and t_step((v, m), nxt) > umax:
            self._known(nxt)

    def _known(self, v: int) -> None:
        """___mark_reg_known: every bound the value (the id kept)."""
        self.tv, self.tm = v, 0
        self.smin = self.smax = _s64(v)
        self.umin = self.umax = v
        self.s32min = self.s32max = _s32(v)
        self.u32min = self.u32max = v & U32

    def _deduce(self) -> None:
        """__reg_deduce_bounds: 32-bit, then 64-bit, then mixed (max/min and the sign
        casts written out: the verifier's most frequent arithmetic)."""
        smin, smax, umin, umax = self.smin, self.smax, self.umin, self.umax
        s32min, s32max, u32min, u32max = self.s32min, self.s32max, self.u32min, self.u32max
        # __reg32_deduce_bounds
        if umin >> 32 == umax >> 32:
            lo, hi = umin & U32, umax & U32
            if lo > u32min:
                u32min = lo
            if hi < u32max:
                u32max = hi
            a = lo - (1 << 32) if lo >> 31 else lo
            b = hi - (1 << 32) if hi >> 31 else hi
            if a <= b:
                if a > s32min:
                    s32min = a
                if b < s32max:
                    s32max = b
        if smin >> 32 == smax >> 32:
            lo, hi = smin & U32, smax & U32
            if lo <= hi:
                if lo > u32min:
                    u32min = lo
                if hi < u32max:
                    u32max = hi
            a = lo - (1 << 32) if lo >> 31 else lo
            b = hi - (1 << 32) if hi >> 31 else hi
            if a <= b:
                if a > s32min:
                    s32min = a
                if b < s32max:
                    s32max = b
        # upper halves two consecutive numbers, lower halves an s32 range from negative
        # to non-negative (s64 [-1, 1] is s32 [-1, 1])
        for lo64, hi64 in ((umin, umax), (smin, smax)):
            if ((lo64 >> 32) + 1) & U32 == (hi64 >> 32) & U32:
                a, b = _s32(lo64), _s32(hi64)
                if a < 0 <= b:
                    if a > s32min:
                        s32min = a
                    if b < s32max:
                        s32max = b
        lo, hi = u32min & U32, u32max & U32
        a = lo - (1 << 32) if lo >> 31 else lo
        b = hi - (1 << 32) if hi >> 31 else hi
        if a <= b:
            if a > s32min:
                s32min = a
            if b < s32max:
                s32max = b
        lo, hi = s32min & U32, s32max & U32
        if lo <= hi:
            if lo > u32min:
                u32min = lo
            if hi < u32max:
                u32max = hi
        elif u32max < lo:  # the u32 range meets only the s32 range's non-negative part
            s32min = _s32(u32min)
            if hi < u32max:
                u32max = hi
        elif hi < u32min:  # ... only its negative part
            s32max = _s32(u32max)
            if lo > u32min:
                u32min = lo
        # __reg64_deduce_bounds
        lo, hi = umin & U64, umax & U64
        a = lo - (1 << 64) if lo >> 63 else lo
        b = hi - (1 << 64) if hi >> 63 else hi
        if a <= b:
            if a > smin:
                smin = a
            if b < smax:
                smax = b
        lo, hi = smin & U64, smax & U64
        if lo <= hi:
            if lo > umin:
                umin = lo
            if hi < umax:
                umax = hi
        elif umax < lo:
            smin = _s64(umin)
            if hi < umax:
                umax = hi
        elif hi < umin:
            smax = _s64(umax)
            if lo > umin:
                umin = lo
        # __reg_deduce_mixed_bounds
        top = ~U32 & U64
        x = (umin & top) | u32min
        if x > umin:
            umin = x
        x = (umax & top) | u32max
        if x < umax:
            umax = x
        x = _s64((smin & top) | u32min)
        if x > smin:
            smin = x
        x = _s64((smax & top) | u32max)
        if x < smax:
            smax = x
        self.s32min, self.s32max, self.u32min, self.u32max = s32min, s32max, u32min, u32max
        if s32min >= 0 and smin >= S32_MIN and smax <= S32_MAX:
            # (as u64: s32max is negative in an impossible range)
            smin, umin = s32min, s32min
            smax, umax = s32max, s32max & U64
            self.tv, self.tm = t_intersect((self.tv, self.tm), t_range(umin, umax))
        self.smin, self.smax, self.umin, self.umax = smin, smax, umin, umax

    def _bound_offset(self) -> None:
        t = t_intersect((self.tv, self.tm), t_range(self.umin, self.umax))
        t32 = t_intersect((t[0] & U32, t[1] & U32), t_range(self.u32min, self.u32max))
        self.tv = (t[0] & ~U32 & U64) | t32[0]
        self.tm = (t[1] & ~U32 & U64) | t32[1]

    def zext32(self) -> None:
        """The upper half became zero (an ALU32 result)."""
        self.tv &= U32
        self.tm &= U32
        self.umin, self.umax = self.u32min, self.u32max
        self.smin, self.smax = self.umin, self.umax

    def coerce(self, size: int) -> None:
        """Zero-extend from ``size`` bytes (coerce_reg_to_size)."""
        if size >= 8:
            return
        # a pure function of the size, the tnum and the bounds: remembered
        key = (size, *self.scalar())
        got = _COERCED.get(key)
        if got is not None:
            self.set_scalar(got)
            return
        self._coerce(size)
        _COERCED.put(key, self.scalar())

    def _coerce(self, size: int) -> None:
        mask = (1 << (8 * size)) - 1
        self.tv &= mask
        self.tm &= mask
        if self.umin >> (8 * size) == self.umax >> (8 * size):
            self.umin &= mask
            self.umax &= mask
        else:
            self.umin, self.umax = 0, mask
        self.smin, self.smax = self.umin, self.umax
        if size < 4:  # a 32-bit truncation keeps the subregister's bounds as they are
            self.s32min, self.s32max, self.u32min, self.u32max = S32_MIN, S32_MAX, 0, U32
        self.sync()

    def coerce_sx(self, size: int) -> None:
        """Sign-extend from ``size`` bytes (coerce_reg_to_size_sx)."""
        bits = 8 * size
        if self.const:
            v = self.tv & ((1 << bits) - 1)
            self.set_known(v - (1 << bits) if v >> (bits - 1) else v)
            return
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        if lo <= self.s32min and self.s32max <= hi:
            # the low 32 bits' signed range fits the narrower type: sign-extending keeps
            # it (measured on 6.18: a wild upper half or a 64-bit range crossing zero
            # does not widen the result)
            smin, smax = self.s32min, self.s32max
            self.smin = smin
            self.smax = smax
            if smin >= 0 or smax < 0:
                self.umin, self.umax = smin & U64, smax & U64
                self.u32min, self.u32max = smin & U32, smax & U32
                self.tv, self.tm = t_range(smin & U64, smax & U64)
            else:
                self.umin, self.umax = 0, U64
                self.tv, self.tm = 0, U64
                if size < 4:
                    self.u32min, self.u32max = 0, U32
                else:  # (s32) leaves the low half: its u32 bounds hold (measured on 6.18)
                    self.sync()
            return
        if (self.smax & U64) >> bits == (self.smin & U64) >> bits:
            m = (1 << bits) - 1

            def sx(x: int) -> int:
                x &= m
                return x - (1 << bits) if x >> (bits - 1) else x
            a, b = sx(self.smax), sx(self.smin)
            smax, smin = max(a, b), min(a, b)
            if (smax >= 0) == (smin >= 0):
                self.smin = self.s32min = smin
                self.smax = self.s32max = smax
                self.umin, self.umax = smin & U64, smax & U64
                self.u32min, self.u32max = smin & U32, smax & U32
                self.tv, self.tm = t_range(smin & U64, smax & U64)
                return
        self.smin = self.s32min = lo
        self.smax = self.s32max = hi
        self.umin = self.u32min = 0
        self.umax, self.u32max = U64, U32
        self.tv, self.tm = 0, U64

    def coerce_subreg_sx(self, size: int) -> None:
        """Sign-extend the low ``size`` bytes into the 32-bit subregister
        (coerce_subreg_to_size_sx); the upper half is the caller's (zext32)."""
        bits = 8 * size

        def sx(x: int) -> int:
            x &= (1 << bits) - 1
            return x - (1 << bits) if x >> (bits - 1) else x
        if self.tm == 0:
            v = sx(self.tv)
            self.tv = v & U64
            self.s32min = self.s32max = _s32(v)
            self.u32min = self.u32max = v & U32
            return
        if (self.s32max & U32) >> bits == (self.s32min & U32) >> bits:
            a, b = sx(self.s32max), sx(self.s32min)
            hi, lo = max(a, b), min(a, b)
            if (lo >= 0) == (hi >= 0):
                self.s32min, self.s32max = lo, hi
                self.u32min, self.u32max = lo & U32, hi & U32
                tv, tm = t_range(lo & U64, hi & U64)
                self.tv, self.tm = tv & U32, tm & U32
                return
        self.s32min, self.s32max = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        self.u32min, self.u32max = 0, U32
        self.tv, self.tm = 0, U32

    def describe(self) -> str:
        """The register as the kernel's log prints it (print_verifier_state)."""
        t = self.t & 0xFF
        if t == SCALAR:
            if self.const:
                return str(_s64(self.tv)) if self.smin < 0 else str(self.tv)
            parts = []
            if self.smin != S64_MIN:
                parts.append(f"smin={self.smin}")
            if self.smax != S64_MAX:
                parts.append(f"smax={self.smax}")
            if self.umin:
                parts.append(f"umin={self.umin}")
            if self.umax != U64:
                parts.append(f"umax={self.umax}")
            if self.tm != U64:
                parts.append(f"var_off={tnum_str((self.tv, self.tm))}")
            return f"scalar({','.join(parts)})"
        if t == STACK and self.const and not self.tv:
            return f"fp{self.off}"
        parts = []
        if self.id:
            parts.append(f"id={self.id}")
        if self.ref:
            parts.append(f"ref_obj_id={self.ref}")
        if self.off:
            parts.append(f"off={self.off}")
        if t in (PKT, PKT_META):
            parts.append(f"r={self.rng}")
        if t in (MAP_VALUE, MAP_PTR) and self.map is not None:
            parts.append(f"map={self.map.kernel_name or self.map.name[:15]},"
                         f"ks={self.map.key_size},vs={self.map.value_size}")
        if t == MEM:
            parts.append(f"sz={self.msize}")
        if not self.const:
            parts.append(f"var_off={tnum_str((self.tv, self.tm))}")
        return f"{type_str(self.t)}{self.bt}({','.join(parts)})"


_new_reg = Reg.__new__
_copy_reg = Reg.copy  # (map over it: cheaper than a comprehension per frame copy)
# Templates a register is set from: an unknown scalar, and known scalars by value.
_UNKNOWN_SCALAR = Reg()
_UNKNOWN_SCALAR.t = SCALAR
_KNOWN: dict[int, Reg] = {}


def _known_template(v: int) -> Reg:
    """The shared register holding the known scalar ``v``: never to be changed."""
    v &= U64
    k = _KNOWN.get(v)
    if k is None:
        k = Reg()
        k.t = SCALAR
        k.tv, k.tm = v, 0
        k.smin = k.smax = _s64(v)
        k.umin = k.umax = v
        k.s32min = k.s32max = _s32(v)
        k.u32min = k.u32max = v & U32
        if len(_KNOWN) >= 1 << 12:
            _KNOWN.clear()
        _KNOWN[v] = k
    return k


def _known(v: int) -> Reg:
    """A new register holding the known scalar ``v``."""
    r = _new_reg(Reg)
    r.set_known(v)
    return r


@functools.cache
def _kallsyms() -> frozenset[str] | None:
    """The names in /proc/kallsyms (None where there is none to read)."""
    try:
        with open("/proc/kallsyms") as fh:
            return frozenset(ln.split()[2] for ln in fh if ln.count(" ") >= 2)
    except OSError:
        return None


def _kallsyms_has(name: str) -> bool:
    """kallsyms_lookup_name finds ``name`` (taken as found without a kallsyms to read)."""
    names = _kallsyms()
    return names is None or name in names


def _ksym_reg(kernel: BtfIndex, btf_id: int) -> Reg:
    """check_pseudo_btf_id's register for a kernel FUNC or VAR: a function's address is
    read-only memory of no size; a per-CPU variable (in .data..percpu) a MEM_PERCPU
    pointer to its type; another variable read-only memory of its type's size, or a
    pointer to its struct."""
    r = Reg()
    t = kernel.type_by_id(btf_id)
    if t.kind == BtfKind.FUNC:
        r.set_ptr(MEM | RDONLY)
        return r
    vtype = t.size_type
    sec = kernel.find(".data..percpu", BtfKind.DATASEC)
    percpu = sec is not None and any(v.type == btf_id for v in kernel.type_by_id(sec).secinfos)
    tt, _ = skip_modifiers(kernel, vtype)
    if percpu or tt.kind in (BtfKind.STRUCT, BtfKind.UNION):
        r.set_ptr(BTF_ID | (PERCPU if percpu else 0))
        r.bt = kernel.type_by_id(vtype).name  # (btf_id is the VAR's own type)
        return r
    sized = btf_resolve_size(kernel, tt, vtype)
    if sized is None:
        raise Refuse(f"ldimm64 unable to resolve the size of type '{tt.name}': -22",
                     errno.EINVAL)
    r.set_ptr(MEM | RDONLY)
    r.msize = sized[1]
    return r
Slot = tuple[bytes, Reg | None]
_EMPTY: Slot = (bytes(8), None)
# A finished state's frame as pruning compares it: callsite, (regno, reg) of the
# registers beyond a type check, and (spi, slot, _significant mask and kinds).
_FramePlan = tuple[int, tuple[tuple[int, Reg], ...], tuple[tuple[int, Slot, int, int], ...]]
_INTS: dict[bytes, int] = {}
_MASKS: dict[bytes, tuple[int, int]] = {}


def _bytes_int(types: bytes) -> int:
    """A slot's 8 byte kinds as one integer (to compare several at once)."""
    v = _INTS.get(types)
    if v is None:
        v = _INTS[types] = int.from_bytes(types, "little")
    return v


def _significant(types: bytes) -> tuple[int, int]:
    """The bytes a state relies on when compared: not invalid, not misc (root's
    allow_uninit_stack), as a mask over _bytes_int, and their kinds under the mask."""
    m = _MASKS.get(types)
    if m is None:
        mask = sum(0xFF << 8 * k for k, b in enumerate(types)
                   if b != S_INVALID and b != S_MISC)
        m = _MASKS[types] = (mask, _bytes_int(types) & mask)
    return m


class Frame:
    """``struct bpf_func_state``: registers and stack of one call frame.

    A copy shares the spilled registers with the frame it was copied from until
    one of the two changes one: change a spilled register only through
    :meth:`spill_w` (or :meth:`State.all_regs`), which makes it this frame's own."""

    __slots__ = ("regs", "stack", "callsite", "sub", "callback", "frameno", "cb_depth",
                 "owned")

    def __init__(self, frameno: int, callsite: int, sub: int) -> None:
        self.regs = [Reg() for _ in range(11)]
        self.regs[10].set_ptr(STACK)
        self.regs[10].frame = frameno
        self.stack: list[Slot] = []
        self.callsite = callsite
        self.sub = sub
        self.callback = 0  # the helper id when this frame is a callback (_ASYNC_CB: async)
        self.cb_depth = 0  # callback_depth: callbacks this frame's call has begun
        self.frameno = frameno
        self.owned = 0  # bit spi: the spilled register at spi is this frame's alone

    def copy(self) -> Frame:
        f = Frame.__new__(Frame)
        f.regs = list(map(_copy_reg, self.regs))
        # most spilled registers never change again: shared until written (spill_w)
        f.stack = self.stack[:]
        f.owned = self.owned = 0
        f.callsite, f.sub, f.callback, f.frameno, f.cb_depth = \
            self.callsite, self.sub, self.callback, self.frameno, self.cb_depth
        return f

    def slot(self, spi: int) -> Slot:
        """The slot to read (its spilled register may be shared: see spill_w)."""
        return self.stack[spi] if spi < len(self.stack) else _EMPTY

    def spill_w(self, spi: int) -> Reg | None:
        """The register spilled at ``spi``, this frame's own, to change in place."""
        if spi >= len(self.stack):
            return None
        types, r = self.stack[spi]
        if r is not None and not self.owned >> spi & 1:
            r = r.copy()
            self.stack[spi] = (types, r)
            self.owned |= 1 << spi
        return r

    def set_slot(self, spi: int, s: Slot) -> None:
        while len(self.stack) <= spi:
            self.stack.append(_EMPTY)
        self.stack[spi] = s
        self.owned &= ~(1 << spi)  # the caller's register may be referenced elsewhere


class State:
    """``struct bpf_verifier_state``: the frames, acquired references, pruning links."""

    __slots__ = ("frames", "refs", "parent", "branches", "pc", "loop_key", "hits", "misses",
                 "locks", "rcu", "preempt", "irqs", "may_goto", "cb_unroll", "hist",
                 "all_precise", "alive", "links", "plan", "quick", "prec", "prec_at", "jh")

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.refs: list[tuple[int, int]] = []  # (id, insn that acquired it)
        # the locks held (REF_TYPE_LOCK/RES_LOCK/RES_LOCK_IRQ references), in the order
        # taken (the last is active_lock): (kind, map, reg id)
        self.locks: tuple[tuple[int, str, int], ...] = ()
        self.rcu = False  # active_rcu_lock: inside bpf_rcu_read_lock
        self.preempt = 0  # active_preempt_locks: bpf_preempt_disable calls not undone
        # REF_TYPE_IRQ references in the order saved (a stack: the last is active_irq_id),
        # as (id, insn that saved it); apart from ``refs``, which an exit must not hold
        self.irqs: list[tuple[int, int]] = []
        self.may_goto = 0  # may_goto_depth: fall-throughs of may_goto on this path
        self.cb_unroll = 0  # callback_unroll_depth: callback bodies entered on this path
        self.parent: State | None = None
        self.branches = 0
        # A kept state: its pc and the exact key of its last frame's registers.
        self.pc = -1
        self.loop_key: tuple[object, ...] | None = None  # computed when first needed
        self.hits = self.misses = 0
        # The instructions run since the parent checkpoint (jmp_history, every insn): a pc,
        # or for a fixed-offset stack access pc | _HIST_STACK | frame << 21 | slot << 24.
        self.hist: list[int] = []
        # linked_regs of the history: at a conditional jump on a scalar with an id (by
        # its index in ``hist``), the scalars sharing the id, as (frame, reg) for a
        # register and (frame, -1 - spi) for a spilled one.
        self.links: dict[int, tuple[tuple[int, int], ...]] = {}
        # jmp_history_cnt: the instructions since the parent checkpoint that Linux's
        # jmp_history records (a jump point reached, a register spilled or filled, a
        # branch on linked scalars); past 40 the next prune point keeps a state.
        self.jh = 0
        self.all_precise = False  # mark_all_scalars_precise reached this state
        # Stack liveness (REG_LIVE_WRITTEN/READ of stack slots, as (frame, spi)): the slots
        # this segment overwrote whole, and for a kept state the slots some path after it
        # read before writing them (complete once the state is finished).
        # A finished state: per frame the mask of its stack slots live at its pc (the
        # slots it compares), as the stack liveness has it when first compared.
        self.alive: list[int] | None = None
        self.plan: list[_FramePlan] | None = None  # how pruning compares it, once finished
        self.quick: list[tuple[Any, ...]] = []  # the plan's checks without side effects
        # A finished state: its precise scalars, registers and slots as (frame, n).
        self.prec: tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]] | None = None
        self.prec_at = 0  # the _Verifier.prec_round prec was collected in

    def copy(self) -> State:
        # every field set here, without __init__'s defaults first (a copy per branch)
        s = _new_state(State)
        s.frames = [f.copy() for f in self.frames]
        s.refs = list(self.refs)
        s.locks = self.locks
        s.rcu, s.preempt = self.rcu, self.preempt
        s.irqs = list(self.irqs)
        s.may_goto = self.may_goto
        s.cb_unroll = self.cb_unroll
        s.parent = self.parent
        s.hist = list(self.hist)
        s.links = dict(self.links) if self.links else {}
        s.jh = self.jh
        s.branches = s.hits = s.misses = s.prec_at = 0
        s.pc = -1
        s.loop_key = s.alive = s.plan = s.prec = None
        s.quick = []
        s.all_precise = False
        return s

    @property
    def cur(self) -> Frame:
        return self.frames[-1]

    def with_id(self, rid: int) -> list[Reg]:
        """Every register and spilled register whose id is ``rid`` (all_regs' order), this
        state's own to change in place (a filter without a call per register)."""
        out: list[Reg] = []
        for f in self.frames:
            for r in f.regs:
                if r.id == rid:
                    out.append(r)
            for spi, (_, spill) in enumerate(f.stack):
                if spill is not None and spill.id == rid:
                    out.append(f.spill_w(spi))  # type: ignore[arg-type]
        return out

    def all_regs(self, want: Callable[[Reg], bool] | None = None) -> list[Reg]:
        """Every register and spilled register (those ``want`` accepts), this state's
        own to change in place."""
        out = []
        for f in self.frames:
            if want is None:
                out.extend(f.regs)
            else:
                out.extend(r for r in f.regs if want(r))
            for spi, (_, spill) in enumerate(f.stack):
                if spill is not None and (want is None or want(spill)):
                    out.append(f.spill_w(spi))  # type: ignore[arg-type]
        return out


_new_state = State.__new__


@dataclass
class _CallMeta:
    """``struct bpf_call_arg_meta``: what a helper's arguments told the verifier."""

    map: MapSpec | None = None
    mem_size: int = 0
    func: int | None = None
    ref: int = 0
    const_key: int | None = None
    dynptr_id: int = 0   # the dynptr argument's id and ref_obj_id (bpf_dynptr_data)
    dynptr_ref: int = 0
    dynptr_release: int = 0  # the ref_obj_id of a ringbuf dynptr being submitted/discarded
    ref_obj: int = 0  # meta->ref_obj_id: a socket argument's reference
    bad_map: bool = False  # the map's type is not the helper's (told after the arguments)
    fmt: bytes = b""  # a constant string argument (bpf_snprintf's format)


BPF_FUNC_DYNPTR_FROM_MEM = 197
_DYNPTR_LOCAL, _DYNPTR_RINGBUF, _DYNPTR_XDP = 1, 2, 5  # the dynptr's type (slot ``sub``)
_DYNPTR_TYPE_STR = {_DYNPTR_LOCAL: "local", _DYNPTR_RINGBUF: "ringbuf", _DYNPTR_XDP: "xdp"}
BTF_FUNC_GLOBAL = 1


class _GArg(NamedTuple):
    """A global function's argument as btf_prepare_func_args types it: ``kind`` is
    scalar, ctx, dynptr, arena, mem (maybe NULL) or mem_nonnull (``size`` bytes),
    trusted or trusted_nullable (a pointer to kernel struct ``struct``)."""

    kind: str
    size: int = 0
    struct: str = ""


@dataclass
class _Global:
    """A global function: its func# (subprog index), name, FUNC_PROTO; what is known."""

    index: int
    name: str
    proto: int
    func: int = 0  # its FUNC type: the arg:<tag> decl tags point at it
    args: tuple[_GArg, ...] | None = None
    called: bool = False


@dataclass
class _KfuncMeta:
    """``struct bpf_kfunc_call_arg_meta``: what a kfunc's arguments told the verifier."""

    release_ref: int = 0
    const_size: int = 0
    dynptr_id: int = 0
    dynptr_kind: int = 0
    dynptr_ref: int = 0  # the dynptr argument's ref_obj_id (a clone shares it)
    iter: tuple[int, int] | None = None  # the iterator argument's (frame, spi)
    map: MapSpec | None = None  # meta->map.ptr: the workqueue's map, then the map argument
    func: int | None = None  # meta->subprogno: the callback argument's function
    # meta->arg_list_head / arg_rbtree_root: the graph root argument's (struct id, node
    # offset in it)
    graph_root: tuple[int, int] | None = None
    list_node_ref: int = 0  # the pushed (added) node's ref_obj_id
    # bpf_refcount_acquire's argument: the object's (struct name, id), and whether it is
    # owned (arg_owning_ref: R0 is not NULL then)
    refcounted: tuple[str, int] | None = None
    owning: bool = False


@dataclass(frozen=True)
class VerifierResult:
    """What a successful verification learned: instructions processed, states kept,
    the deepest combined stack, the log (``processed N insns ...``) and per load, store
    and atomic pc what its base pointed to (:mod:`pyxdp.verifier.facts`)."""

    insns_processed: int
    states: int
    stack_depth: tuple[int, ...]
    log: str
    mem: dict[int, MemAccess] = dataclasses.field(default_factory=dict)


# -- liveness -------------------------------------------------------------------------
def _use_def(i: Instruction) -> tuple[int, int]:
    """Registers an instruction reads and writes (bit masks)."""
    cls = i.code & 7
    if cls in (op.BPF_ALU, op.BPF_ALU64):
        o = i.code & 0xF0
        use = 0 if o == op.BPF_MOV else 1 << i.dst
        if i.code & op.BPF_X and o not in (op.BPF_NEG, op.BPF_END):
            use |= 1 << i.src
        return use, 1 << i.dst
    if cls == op.BPF_LDX:
        return 1 << i.src, 1 << i.dst
    if cls == op.BPF_ST:
        return 1 << i.dst, 0
    if cls == op.BPF_STX:
        if op.is_atomic_load(i.code, i.imm):
            return 1 << i.src, 1 << i.dst
        if i.code & 0xE0 == op.BPF_ATOMIC:
            use = (1 << i.dst) | (1 << i.src)
            if i.imm == op.BPF_CMPXCHG:
                return use | 1, 1
            return use, (1 << i.src) if i.imm & op.BPF_FETCH else 0
        return (1 << i.dst) | (1 << i.src), 0
    if cls == op.BPF_LD:
        return 0, 1 << i.dst
    if cls in (op.BPF_JMP, op.BPF_JMP32):
        o = i.code & 0xF0
        if o == op.BPF_CALL:
            return 0x3E, 0x3F
        if o == op.BPF_EXIT:
            return 1, 0
        if o in (op.BPF_JA, BPF_JCOND):
            return 0, 0
        use = 1 << i.dst
        if i.code & op.BPF_X:
            use |= 1 << i.src
        return use, 0
    return 0, 0


def _succs(insns: Sequence[Instruction], pc: int) -> tuple[int, ...]:
    i = insns[pc]
    cls = i.code & 7
    if cls == op.BPF_LD and i.code == op.OP_LD_IMM64:
        return (pc + 2,)
    if cls in (op.BPF_JMP, op.BPF_JMP32):
        o = i.code & 0xF0
        if o == op.BPF_EXIT:
            return ()
        if o == op.BPF_CALL:
            return (pc + 1,)
        if o == op.BPF_JA:
            off = i.imm if cls == op.BPF_JMP32 else i.off
            return (pc + 1 + off,)
        return (pc + 1, pc + 1 + i.off)
    return (pc + 1,)


def _forward_only(succ: Sequence[tuple[int, ...]]) -> bool:
    """Whether every edge of the control-flow graph ``succ`` (successors by pc) leads
    to a later instruction or out of the program: no loop, so one backward sweep finds
    every fixed point and no instruction is in a strongly connected part."""
    return all(w > v for v, ws in enumerate(succ) for w in ws)


def _liveness(insns: Sequence[Instruction], call_use: dict[int, int],
              succ: Sequence[tuple[int, ...]]) -> list[int]:
    """Registers live before each instruction (compute_live_registers); a call reads the
    registers ``call_use`` gives for its pc (its prototype's arguments), else R1-R5.
    ``succ``: each instruction's successors (:func:`_succs`)."""
    n = len(insns)
    live = [0] * n
    ud = [_use_def(i) for i in insns]
    for pc, use in call_use.items():
        ud[pc] = (use, ud[pc][1])
    # Without a backward edge the first sweep (from the end) is the fixed point.
    once = _forward_only(succ)
    changed = True
    while changed:
        changed = False
        for pc in range(n - 1, -1, -1):
            out = 0
            for s in succ[pc]:
                if s < n:
                    out |= live[s]
            use, dfn = ud[pc]
            new = use | (out & ~dfn)
            if new != live[pc]:
                live[pc] = new
                changed = True
        if once:
            break
    return live


# -- the verifier -------------------------------------------------------------------------
_ALU_NAMES = {op.BPF_ADD: "+=", op.BPF_SUB: "-=", op.BPF_MUL: "*=", op.BPF_DIV: "/=",
              op.BPF_OR: "|=", op.BPF_AND: "&=", op.BPF_LSH: "<<=", op.BPF_RSH: ">>=",
              op.BPF_NEG: "neg", op.BPF_MOD: "%=", op.BPF_XOR: "^=", op.BPF_MOV: "=",
              op.BPF_ARSH: "s>>=", op.BPF_END: "endian"}
_FLIP = {op.BPF_JGT: op.BPF_JLT, op.BPF_JGE: op.BPF_JLE, op.BPF_JLT: op.BPF_JGT,
         op.BPF_JLE: op.BPF_JGE, op.BPF_JSGT: op.BPF_JSLT, op.BPF_JSGE: op.BPF_JSLE,
         op.BPF_JSLT: op.BPF_JSGT, op.BPF_JSLE: op.BPF_JSGE, op.BPF_JEQ: op.BPF_JEQ,
         op.BPF_JNE: op.BPF_JNE, op.BPF_JSET: op.BPF_JSET}
_NEG = {op.BPF_JGT: op.BPF_JLE, op.BPF_JGE: op.BPF_JLT, op.BPF_JLT: op.BPF_JGE,
        op.BPF_JLE: op.BPF_JGT, op.BPF_JSGT: op.BPF_JSLE, op.BPF_JSGE: op.BPF_JSLT,
        op.BPF_JSLT: op.BPF_JSGE, op.BPF_JSLE: op.BPF_JSGT, op.BPF_JEQ: op.BPF_JNE,
        op.BPF_JNE: op.BPF_JEQ}
_JSET_NOT = 0xF0  # the negation of JSET (the kernel's BPF_JSET | BPF_X trick)
BPF_JCOND = 0xE0  # may_goto (src_reg BPF_MAY_GOTO): clang's can_loop / cond_break
OP_MAY_GOTO = op.BPF_JMP | BPF_JCOND
OP_EXIT = op.BPF_JMP | op.BPF_EXIT
BPF_FUNC_LOOP, BPF_FUNC_FOR_EACH_MAP_ELEM = 181, 164
# maps whose ops walk their elements for bpf_for_each_map_elem (map_for_each_callback)
_FOR_EACH_MAPS = frozenset({
    MT.BPF_MAP_TYPE_ARRAY, MT.BPF_MAP_TYPE_PERCPU_ARRAY, MT.BPF_MAP_TYPE_HASH,
    MT.BPF_MAP_TYPE_PERCPU_HASH, MT.BPF_MAP_TYPE_LRU_HASH, MT.BPF_MAP_TYPE_LRU_PERCPU_HASH})
BPF_FUNC_TIMER_SET_CALLBACK = 170
BPF_FUNC_SNPRINTF = 165
# in_async_callback_fn: frame 0 of a bpf_timer's or bpf_wq's callback, verified on its own
_ASYNC_CB = -1
# ... of a bpf_task_work's callback: Linux 6.18 checks no range of its return value
_TASK_WORK_CB = -2
# Frame.callback of bpf_rbtree_add's less (in_rbtree_lock_required_cb)
_RBTREE_CB = -2
_STX_DW = op.BPF_STX | op.BPF_MEM | op.BPF_DW
_LDX_DW = op.BPF_LDX | op.BPF_MEM | op.BPF_DW
# helpers that call a callback back (calls_callback): bpf_loop, bpf_for_each_map_elem,
# bpf_find_vma, bpf_user_ringbuf_drain
_CALLBACK_HELPERS = frozenset((BPF_FUNC_LOOP, BPF_FUNC_FOR_EACH_MAP_ELEM, 180, 209))
_PKT_CHANGING = frozenset(k for k, p in PROTOS.items() if p.pkt_data)
_SIZES = {op.BPF_B: 1, op.BPF_H: 2, op.BPF_W: 4, op.BPF_DW: 8}




def _atomic_misfit(i: Instruction) -> str | None:
    """check_atomic's and check_atomic_rmw's refusal of a BPF_ATOMIC's imm or size."""
    if i.imm not in op.ATOMIC_OP_NAMES and i.imm not in (op.BPF_LOAD_ACQ, op.BPF_STORE_REL):
        return f"BPF_ATOMIC uses invalid atomic opcode {i.imm & U32:02x}"
    if i.imm in op.ATOMIC_OP_NAMES and i.code & 0x18 not in (op.BPF_W, op.BPF_DW):
        return "invalid atomic operand size"
    return None


def _atomic_ptr_type_ok(reg: Reg) -> bool:
    """atomic_ptr_type_ok: no atomic, load-acquire or store-release through the context,
    a packet pointer or a socket (flow keys and arenas are not XDP's)."""
    return reg.t not in (CTX, PKT, PKT_META, SOCK, SOCK_COMMON)


def _bt_dst(i: Instruction) -> int:
    """For _Verifier.bt_dst: an ALU or load instruction's destination (an ALU negation or
    byte swap, a jump always, a may_goto or a conditional jump on an immediate: 11, what
    backtracking never changes at), else -1."""
    cls = i.code & 7
    if cls in (op.BPF_ALU, op.BPF_ALU64):
        return 11 if i.code & 0xF0 in (op.BPF_NEG, op.BPF_END) else i.dst
    if cls == op.BPF_LDX or op.is_atomic_load(i.code, i.imm):
        return i.dst
    if cls in (op.BPF_JMP, op.BPF_JMP32):
        o = i.code & 0xF0
        if o in (op.BPF_JA, BPF_JCOND) or (
                o not in (op.BPF_CALL, op.BPF_EXIT) and not i.code & op.BPF_X):
            return 11
    return -1


def _loop_sccs(succs: Sequence[tuple[int, ...]]) -> list[int]:
    """compute_scc: each instruction's loop (a strongly connected part of a function's
    control-flow graph; a call of a helper that calls back is none: Linux 6.18 adds no
    backedge where callback states converge) as a number from 1, 0 outside loops. A
    loop's number names its SCC visit. ``succs``: each instruction's successors
    (:func:`_succs`)."""
    n = len(succs)
    if _forward_only(succs):  # no edge back: every part is one instruction, no loop
        return [0] * n
    index = [-1] * n
    low = [0] * n
    on = [False] * n
    scc = [0] * n
    nscc = 0
    stack: list[int] = []
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work: list[tuple[int, int]] = [(root, 0)]
        while work:
            v, k = work.pop()
            if k == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on[v] = True
            succ = [w for w in succs[v] if 0 <= w < n]
            if k < len(succ):
                work.append((v, k + 1))
                w = succ[k]
                if index[w] < 0:
                    work.append((w, 0))
                elif on[w]:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on[w] = False
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in succs[v]:
                    nscc += 1
                    for w in comp:
                        scc[w] = nscc
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return scc


_UNBOUND = Reg()
_UNBOUND.set_unknown()
_ALL_SPILL, _ALL_MISC = bytes([S_SPILL] * 8), bytes([S_MISC] * 8)
_MISC_BYTES = bytes([S_MISC, S_INVALID])


_BITS: dict[int, tuple[int, ...]] = {}  # a memo: the same live masks recur at a pc


def _bits(mask: int) -> tuple[int, ...]:
    """The set bits of ``mask``, lowest first."""
    got = _BITS.get(mask)
    if got is not None:
        return got
    out = []
    m = mask
    while m:
        low = m & -m
        out.append(low.bit_length() - 1)
        m ^= low
    got = tuple(out)
    if len(_BITS) < 4096:
        _BITS[mask] = got
    return got


def _stack_scalar(slot: Slot) -> Reg | None:
    """scalar_reg_for_stack: a 64-bit spilled scalar, or for a slot of misc bytes (root:
    allow_uninit_stack, uninitialised bytes too) an unbounded scalar."""
    types, spill = slot
    if types == _ALL_SPILL and spill is not None and spill.t == SCALAR:
        return spill
    return _UNBOUND if not types.translate(None, _MISC_BYTES) else None


def _cur_stack_scalar(stack: list[Slot], spi: int) -> Reg | None:
    """scalar_reg_for_stack of the current state's slot ``spi``: none past the stack
    the path has written (allocated_stack), where stacksafe fails anyway."""
    return _stack_scalar(stack[spi]) if spi < len(stack) else None


# Each map type's kernel struct (its bpf_map_ops' map_btf_id), which root may read
# through the map pointer.
_MAP_STRUCTS: dict[int, str] = {
    **dict.fromkeys((MT.BPF_MAP_TYPE_HASH, MT.BPF_MAP_TYPE_PERCPU_HASH, MT.BPF_MAP_TYPE_LRU_HASH,
                     MT.BPF_MAP_TYPE_LRU_PERCPU_HASH, MT.BPF_MAP_TYPE_HASH_OF_MAPS), "bpf_htab"),
    **dict.fromkeys((MT.BPF_MAP_TYPE_ARRAY, MT.BPF_MAP_TYPE_PERCPU_ARRAY,
                     MT.BPF_MAP_TYPE_PROG_ARRAY, MT.BPF_MAP_TYPE_PERF_EVENT_ARRAY,
                     MT.BPF_MAP_TYPE_CGROUP_ARRAY, MT.BPF_MAP_TYPE_ARRAY_OF_MAPS), "bpf_array"),
    MT.BPF_MAP_TYPE_LPM_TRIE: "lpm_trie",
    MT.BPF_MAP_TYPE_STACK_TRACE: "bpf_stack_map",
    MT.BPF_MAP_TYPE_DEVMAP: "bpf_dtab",
    MT.BPF_MAP_TYPE_DEVMAP_HASH: "bpf_dtab",
    MT.BPF_MAP_TYPE_CPUMAP: "bpf_cpu_map",
    MT.BPF_MAP_TYPE_XSKMAP: "xsk_map",
    MT.BPF_MAP_TYPE_SOCKMAP: "bpf_stab",
    MT.BPF_MAP_TYPE_SOCKHASH: "bpf_shtab",
    MT.BPF_MAP_TYPE_QUEUE: "bpf_queue_stack",
    MT.BPF_MAP_TYPE_STACK: "bpf_queue_stack",
    MT.BPF_MAP_TYPE_RINGBUF: "bpf_ringbuf_map",
    MT.BPF_MAP_TYPE_USER_RINGBUF: "bpf_ringbuf_map",
    MT.BPF_MAP_TYPE_BLOOM_FILTER: "bpf_bloom_filter",
}
ENOTSUPP = 524  # the kernel-internal errno BPF_PROG_LOAD passes on


# Argument kinds _arg tests for (built once: an enum member is an attribute load)
_NULLABLE_ARGS = (Arg.MEM_RDONLY_OR_NULL, Arg.STACK_OR_NULL, Arg.MEM_OR_NULL)
_MAP_VALUE_ARGS = (Arg.MAP_VALUE, Arg.UNINIT_MAP_VALUE)


def _helper_name(fid: int) -> str:
    if fid in PYXDP_HELPER_NAMES:
        return f"bpf_{PYXDP_HELPER_NAMES[fid]}"
    if 0 <= fid < len(HELPER_NAMES):  # func_id_name: id 0 is "bpf_unspec"
        return f"bpf_{HELPER_NAMES[fid]}"
    return "unknown"


def _rdonly(m: MapSpec) -> bool:
    return bool(m.flags & BPF_F_RDONLY_PROG) or m.frozen


def btf_load_refusal(btf: Btf, core_btf: str | os.PathLike[str] | None) -> str | None:
    """Why ``BPF_BTF_LOAD`` refuses the program's BTF (None: it loads): the kernel's
    checks (:func:`pyxdp.btf.kcheck.kernel_error`, struct records included), or
    ``btf_parse_kptr``'s
    ENOENT for a referenced ``__kptr`` to a kernel struct with no destructor kfunc
    (``btf_find_dtor_kfunc``; the kernel structs with one are :data:`KPTR_DTORS`; a
    struct the kernel lacks is the program's own, an object of bpf_obj_new)."""
    why = kernel_error(btf)  # BPF_BTF_LOAD's own checks, struct records included
    if why is not None:
        return why
    for sid, target in btf.struct_meta_kptrs():
        name = btf.types[target].name
        if name not in KPTR_DTORS and core_target(core_btf).find(name, BtfKind.STRUCT):
            return (f"struct {btf.types[sid].name}: a __kptr to kernel struct {name}, "
                    "which has no destructor kfunc (ENOENT)")
    return None


def _wrap_add(umin: int, umax: int, vmin: int, vmax: int, mask: int) -> tuple[int, int]:
    """Unsigned bounds of an add (scalar_min_max_add): kept, wrapped, when both ends
    overflow or neither does; unbounded when only the upper one does."""
    lo, hi = umin + vmin, umax + vmax
    if lo <= mask < hi:
        return 0, mask
    return lo & mask, hi & mask


def _wrap_sub(umin: int, umax: int, vmin: int, vmax: int, mask: int) -> tuple[int, int]:
    """Unsigned bounds of a subtraction (scalar_min_max_sub): kept, wrapped, when both
    ends underflow or neither does; unbounded when only the lower one does."""
    lo, hi = umin - vmax, umax - vmin
    if lo < 0 <= hi:
        return 0, mask
    return lo & mask, hi & mask


class _Verifier:
    # more attributes than an instance dict shares keys for (30): slots keep every
    # self.attribute and self.method() on the interpreter's specialized fast paths
    # (a new attribute needs its name here)
    __slots__ = ("async_cbs", "aux_ptr", "backedges", "bt_dst", "btf", "call_types",
                 "cb_sites", "core_btf", "depth", "devmap", "encoding", "entry_of",
                 "exc_cb", "facts",
                 "fc_keep", "fc_off", "fc_pattern", "fc_spills", "field_lists", "fields",
                 "forced", "globals", "gpl", "graph_roots", "id_gen", "in_exc_cb",
                 "in_global", "insns", "iter_next", "jh_at", "jmp_point", "jmps", "kept",
                 "kfunc_at", "kfunc_by_id", "kfunc_zero", "kfunc_zero_reached", "kptrs",
                 "layout", "limit", "live", "log", "loop_inline", "loose", "map_at",
                 "maps", "may_goto", "not_kfunc", "noted", "nstates", "obj_recs", "paths",
                 "pc", "prec_round", "prev_insns", "prev_jmps", "processed", "prune",
                 "scc", "spec", "stack_live", "starts", "state", "strict_align",
                 "subprogs", "succ", "sync_cbs", "syscall", "tmp_id", "visit_entry",
                 "visits")

    def __init__(self, spec: ProgramSpec, maps: dict[str, MapSpec], *,
                 limit: int = BPF_COMPLEXITY_LIMIT_INSNS, btf: Btf | None = None,
                 core_btf: str | os.PathLike[str] | None = None) -> None:
        # a BTF Linux refuses (BPF_BTF_LOAD) is not loaded: libbpf goes on without it, and
        # the program is loaded without func and line info (they refer to that BTF)
        if btf is not None and btf_load_refusal(btf, core_btf) is not None:
            btf = None
            spec = dataclasses.replace(spec, func_info=(), line_info=())
        self.spec = spec
        self.btf = btf
        self.core_btf = core_btf  # where kernel types are looked up (core_target's order)
        # the encodings Linux refuses at once or where reached, the fields cleared
        self.encoding = linux_fields(spec.insns)
        self.insns = self.encoding.insns
        self.maps = maps
        self.limit = limit
        self.map_at = {r.pc: r for r in spec.map_refs}
        # a SEC("syscall") program (BPF_PROG_TYPE_SYSCALL): its own context, helper set
        # and the sleepable rules; any other is XDP
        self.syscall = spec.prog_type == "syscall"
        self.layout = self._validate()
        self.subprogs = [s for s, _ in self.layout.functions]
        # functions as Linux counts them (add_subprog): called, or a callback's address
        # taken; a function's func# is its place among them
        n = len(self.insns)
        self.starts = set(self.subprogs) | {
            pc + 1 + i.imm for pc, i in enumerate(self.insns)
            if i.code == op.OP_LD_IMM64 and i.src == op.PseudoSrc.BPF_PSEUDO_FUNC and
            0 <= pc + 1 + i.imm < n}
        counted = sorted(self.starts)
        self.kfunc_at = {k.pc: k.name for k in spec.kfuncs}
        self.kfunc_at.update(self.kfunc_by_id)
        # Global (non-static) functions by start: each is verified once, on its own, from
        # its BTF prototype; a caller sees only the scalar it returns.
        self.globals: dict[int, _Global] = {}
        if btf is not None:
            for fi in spec.func_info:
                if fi.insn_off and fi.insn_off in self.subprogs:
                    t = btf.type_by_id(fi.type_id)
                    if t.kind is BtfKind.FUNC and t.linkage == BTF_FUNC_GLOBAL:
                        self.globals[fi.insn_off] = _Global(
                            counted.index(fi.insn_off), t.name, t.type, fi.type_id)
        self.in_global = False
        self.aux_ptr: dict[int, int] = {}  # insn_aux_data's ptr_type of loads and stores
        # bpf_fastcall: pattern instructions, spills per inlined call, each function's
        # fastcall_stack_off and whether it keeps its fastcall stack (_mark_fastcall_patterns)
        self.fc_pattern: set[int] = set()
        self.fc_spills: dict[int, int] = {}
        self.fc_off: dict[int, int] = {}
        self.fc_keep: set[int] = set()
        self.exc_cb: int | None = None  # the exception callback's start (_find_exception_cb)
        self.async_cbs: set[int] = set()  # timer and work item callbacks (push_async_cb)
        self.sync_cbs: set[int] = set()  # the callbacks a reached call pushed (is_cb)
        self.in_exc_cb = False
        self.fields: dict[str, dict[str, int]] = {}
        self.kptrs: dict[str, dict[int, int]] = {}  # map -> its __kptr fields (_kptrs)
        self.obj_recs: dict[int, list[tuple[str, int]]] = {}  # struct id -> _obj_fields
        # call pc -> the type its bpf_obj_new or bpf_obj_drop was first verified with
        self.call_types: dict[int, tuple[int, int | None]] = {}
        # (root kind, map name or _OBJ_LOCK, value or object struct id) -> its list heads
        # or tree roots (offset -> the struct held, its node's offset)
        self.graph_roots: dict[tuple[str, str, int | None], dict[int, tuple[int, int]]] = {}
        self.field_lists: dict[str, list[tuple[str, int]]] = {}
        self.strict_align = bool(spec.flags & BPF_F_STRICT_ALIGNMENT) and \
            not spec.flags & BPF_F_ANY_ALIGNMENT
        self.devmap = spec.expected_attach_type == BPF_XDP_DEVMAP
        self.gpl = spec.license.split("\0")[0] in _GPL_LICENSES
        n = len(self.insns)
        # backtrack_insn's quick exit: an instruction that changes nothing the walk wants
        # unless register (this) is wanted (11: never), or -1: see _backtrack_insn
        self.bt_dst = [_bt_dst(i) for i in self.insns]
        self.prune = [False] * n
        # check_cfg's jump points (mark_jmp_point): the prune points but a conditional
        # jump and a bpf-to-bpf call themselves
        self.jmp_point = [False] * n
        for pc in range(n):
            i = self.insns[pc]
            if pc and self.insns[pc - 1].code == op.OP_LD_IMM64:
                if pc - 2 < 0 or self.insns[pc - 2].code != op.OP_LD_IMM64:
                    continue
            # check_cfg's prune points: a jump's target (not its fall-through), a
            # conditional jump itself, the insn after a call, a bpf-to-bpf call and its
            # callee's entry
            if (i.code & 7) in (op.BPF_JMP, op.BPF_JMP32) and i.code & 0xF0 not in (
                    op.BPF_EXIT, op.BPF_CALL):
                target = _succs(self.insns, pc)[-1]
                if 0 <= target < n:
                    self.prune[target] = self.jmp_point[target] = True
                if i.code & 0xF0 != op.BPF_JA:
                    self.prune[pc] = True
            elif i.code == op.OP_CALL:
                if pc + 1 < n:
                    self.prune[pc + 1] = self.jmp_point[pc + 1] = True
                if i.src == op.CallSrc.BPF_PSEUDO_CALL and 0 <= pc + 1 + i.imm < n:
                    self.prune[pc] = self.prune[pc + 1 + i.imm] = True
                    self.jmp_point[pc + 1 + i.imm] = True
            elif i.code == op.OP_LD_IMM64 and i.src == op.PseudoSrc.BPF_PSEUDO_FUNC:
                # a callback's address: visited as a call (visit_func_call_insn)
                for target in (pc, pc + 2, pc + 1 + i.imm):
                    if 0 <= target < n:
                        self.prune[target] = True
                        if target != pc:
                            self.jmp_point[target] = True
        succ = [_succs(self.insns, pc) for pc in range(n)]
        # A tail call that succeeds leaves its function (visit_tailcall_insn): the
        # liveness and loop analyses see an edge to the function's last exit too.
        ends = self.subprogs[1:] + [n]
        for k, start in enumerate(self.subprogs):
            tails = [pc for pc in range(start, ends[k]) if self.insns[pc].code == op.OP_CALL
                     and self.insns[pc].src == op.CallSrc.BPF_HELPER_CALL and
                     self.insns[pc].imm == 12]
            exits = [pc for pc in range(start, ends[k]) if self.insns[pc].code == OP_EXIT]
            if tails and exits:
                for pc in tails:
                    succ[pc] = (pc + 1, exits[-1])
        self.succ = succ
        self.live = _liveness(self.insns, self._call_uses(), succ)
        self.loose = False  # pruning at a loop-free pc: imprecise scalars match any scalar
        # Open-coded iterators: their _next calls are forced checkpoints.
        self.iter_next = frozenset(
            pc for pc, name in self.kfunc_at.items()
            if name in KFUNCS and KFUNCS[name].flags & KF_ITER_NEXT)
        self.may_goto = frozenset(pc for pc in range(n) if self.insns[pc].code == OP_MAY_GOTO
                                  and not (pc and self.insns[pc - 1].code == op.OP_LD_IMM64))
        # Calls of helpers that call back (_CALLBACK_HELPERS): the callback returns to the
        # call, which calls it again until the states converge.
        self.loop_inline: dict[int, tuple[bool, int]] = {}  # bpf_loop call -> (fit, callback)
        self.cb_sites = frozenset(
            pc for pc in range(n) if self.insns[pc].code == op.OP_CALL and
            self.insns[pc].src == op.CallSrc.BPF_HELPER_CALL and self.insns[pc].imm in
            _CALLBACK_HELPERS) | {pc for pc, k in self.kfunc_at.items() if k == _RBTREE_ADD}
        self.stack_live = StackLiveness(succ, sorted(self.starts), self.cb_sites)
        # Forced checkpoints: a state is kept at each visit (is_force_checkpoint).
        self.forced = self.iter_next | self.may_goto | self.cb_sites
        for pc in self.forced:
            self.prune[pc] = True
        self.scc = _loop_sccs(succ)
        # SCC visits (maybe_enter_scc / maybe_exit_scc), by callchain: the kept state
        # that entered the loop while none of its states was being explored, and how
        # many loop hits (backedges) the visit has had. A state's marks are incomplete
        # only while its visit has backedges (incomplete_read_marks); the visit ends
        # when its entry state's last branch ends.
        self.visits: dict[tuple[int, ...], int] = {}  # callchain -> backedges
        self.visit_entry: dict[tuple[int, ...], State] = {}
        self.backedges: dict[tuple[int, ...], list[tuple[State, State, int]]] = {}
        self.prec_round = 0
        self.entry_of: dict[State, tuple[int, ...]] = {}
        # All kept states per pc, in the order kept (explored_states).
        self.kept: dict[int, list[State]] = {}
        self.jmps = self.prev_jmps = self.prev_insns = 0
        self.id_gen = 0
        self.tmp_id = 1 << 48  # check_scalar_ids' fresh ids, apart from every real one
        self.processed = 0
        self.jh_at = 0  # the instruction (by processed count) jmp_history last recorded
        self.nstates = 0
        self.depth = {s: 0 for s in self.subprogs}
        self.log: list[str] = []
        self.pc = 0
        self.state: State | None = None
        self.paths: list[tuple[State, int]] | None = None  # the walk's queued paths
        self.facts = AccessFacts(maps)
        self.noted: dict[tuple[int, int, int], MapSpec | None] = {}  # accesses noted in facts

    def _call_uses(self) -> dict[int, int]:
        """get_call_summary: a helper or kfunc call reads as many registers as its
        prototype has arguments (a call of something unknown, all of R1-R5)."""
        out: dict[int, int] = {}
        for pc, i in enumerate(self.insns):
            if i.code != op.OP_CALL:
                continue
            nargs = -1
            if i.src == op.CallSrc.BPF_HELPER_CALL and i.imm in PROTOS:
                nargs = len(PROTOS[i.imm].args)
            elif i.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL:
                k = KFUNCS.get(self.kfunc_at.get(pc, ""))
                if k is not None:
                    nargs = len(k.params)
            if nargs >= 0:
                out[pc] = ((1 << (nargs + 1)) - 1) & ~1
        return out

    def _validate(self) -> Layout:
        """pyxdp's ISA checks; the one the kernel words differently gets its words."""
        # Writes to r10 are refused on the path that reaches them (do_check), not here.
        insns = [dataclasses.replace(i, dst=0) if i.dst == 10 and self._writes_dst(i) else i
                 for i in self.insns]
        second = {pc + 1 for pc, i in enumerate(insns) if i.code == op.OP_LD_IMM64}
        for pc, i in enumerate(insns):  # may_goto is checked as the jump it may take
            if i.code == OP_MAY_GOTO and pc not in second:
                insns[pc] = Instruction(op.OP_JA, 0, 0, i.off, 0)
        for k in self.spec.kfuncs:  # a kfunc call is checked as a call (pyxdp's ISA has none)
            if 0 <= k.pc < len(insns) and insns[k.pc].code == op.OP_CALL:
                insns[k.pc] = dataclasses.replace(insns[k.pc], src=0, imm=0, off=0)
        self.kfunc_zero: set[int] = set()  # kfunc calls of btf_id 0 (see _nameless_kfuncs)
        self.kfunc_zero_reached = False
        self.not_kfunc: set[int] = set()  # calls of a kernel function that is no kfunc
        self.kfunc_by_id = self._nameless_kfuncs(insns, second)
        # check_cfg, not check_subprogs, refuses a jump into an ld_imm64's second half,
        # after the walk (_check_cfg): the structural check sees it land on the first
        for pc, i in enumerate(insns):
            jt = None if pc in second else jump_target(i, pc)
            if jt is not None and jt in second:
                if i.code == op.BPF_JMP32 | op.BPF_JA:
                    insns[pc] = dataclasses.replace(i, imm=i.imm - 1)
                elif i.off > -(1 << 15):
                    insns[pc] = dataclasses.replace(i, off=i.off - 1)
        for pc in second:  # a kernel symbol's module BTF fd: check_pseudo_btf_id's to refuse
            if pc < len(insns) and insns[pc - 1].src == op.PseudoSrc.BPF_PSEUDO_BTF_ID:
                insns[pc] = dataclasses.replace(insns[pc], imm=0)
        for pc, i in enumerate(insns):  # LD_ABS/LD_IND: refused where reached (check_ld_abs)
            if i.code & 7 == op.BPF_LD and op.bpf_mode(i.code) in (op.BPF_ABS, op.BPF_IND) \
                    and pc not in second:
                insns[pc] = Instruction(op.BPF_ALU64 | op.BPF_MOV | op.BPF_K, 0, 0, 0, 0)
        for pc, i in enumerate(insns):  # BPF_ATOMIC's imm and size: refused where reached
            if i.code & 0xE7 == op.BPF_STX | op.BPF_ATOMIC and pc not in second and \
                    _atomic_misfit(i) is not None:
                insns[pc] = Instruction(op.BPF_STX | op.BPF_ATOMIC | op.BPF_DW, i.dst, i.src,
                                        i.off, op.BPF_ADD)
        early = self.encoding.early  # resolve_pseudo_ldimm64's, after check_subprogs'
        try:  # recursion goes as deep as the walk or check_max_stack_depth lets it
            layout = validate(insns, recursion=True)
        except InvalidProgram as e:
            msg, err = None, errno.EINVAL
            if early is not None and e.rule not in (
                    "jump-range", "jump-out-of-function", "fall-through", "call-range"):
                msg = early
            elif e.rule in ("jump-range", "jump-out-of-function") and e.pc is not None:
                # check_subprogs
                target = _succs(insns, e.pc)[-1] if e.rule == "jump-out-of-function" else \
                    int(re.search(r"jump to pc (-?\d+)", str(e)).group(1))  # type: ignore[union-attr]
                msg = f"jump out of range from insn {e.pc} to {target}"
            elif e.rule == "fall-through":
                msg = "last insn is not an exit or jmp"
            elif e.rule == "call-range":  # add_subprog
                msg = "call to invalid destination"
            elif e.rule == "register":  # check_reg_arg
                reg = re.search(r"register r(\d+) is invalid", str(e))
                if reg is not None and int(reg.group(1)) > 10:
                    msg = f"R{reg.group(1)} is invalid"
            if msg is None:
                raise
            self.pc = e.pc or 0
            self.processed = self.nstates = 0
            self.log = []
            self.state = None
            raise self._error(Refuse(msg, err)) from None
        if early is not None:
            self.pc = self.processed = self.nstates = 0
            self.log = []
            self.state = None
            try:  # the map loads before it are resolved first
                self._check_map_fds(self.encoding.early_pc)
            except Refuse as e:
                raise self._error(e) from None
            self.pc = 0
            raise self._error(Refuse(early, errno.EINVAL))
        return layout

    def _nameless_kfuncs(self, insns: list[Instruction], second: set[int]) -> dict[int, str]:
        """add_kfunc_call for kfunc calls no extern names (raw bytecode): Linux's refusals
        in program order, and the name of each btf_id that is a kernel function. The
        calls are left as plain calls in ``insns`` for the structural checks."""
        named = {k.pc for k in self.spec.kfuncs}
        gpl = self.spec.license.split("\0")[0] in _GPL_LICENSES
        out: dict[int, str] = {}
        kernel: BtfIndex | None = None
        for pc, i in enumerate(insns):
            if pc in second or pc in named or i.code != op.OP_CALL or \
                    i.src != op.CallSrc.BPF_PSEUDO_KFUNC_CALL:
                continue
            insns[pc] = dataclasses.replace(i, src=0, imm=0, off=0)
            msg = None
            if not gpl:
                msg = "cannot call kernel function from non-GPL compatible program"
            elif i.off < 0:  # find_kfunc_desc_btf
                msg = ("negative offset disallowed for kernel module function call\n"
                       "failed to find BTF for kernel function")
            elif i.off > 0:  # pyxdp passes no fd_array
                msg = ("kfunc offset > 0 without fd_array is invalid\n"
                       "failed to find BTF for kernel function")
            elif i.imm == 0:  # check_kfunc_call skips it; fixup_kfunc_call refuses it
                self.kfunc_zero.add(pc)
                continue
            else:
                btf_id = i.imm & 0xFFFF_FFFF
                kernel = kernel or core_target(self.core_btf)
                t = kernel.type_by_id(btf_id) if 0 < btf_id < len(kernel) else None
                if t is None or t.kind is not BtfKind.FUNC:  # fetch_kfunc_meta
                    msg = f"kernel btf_id {btf_id} is not a function"
                else:
                    out[pc] = t.name
                    if t.name not in KFUNCS and _not_kfunc(kernel, btf_id):
                        self.not_kfunc.add(pc)  # do_check says so (check_kfunc_call)
                    proto = KFUNCS.get(t.name)
                    bound = bool(self.spec.ifindex and self.spec.flags & BPF_F_XDP_DEV_BOUND_ONLY)
                    if proto is not None and proto.metadata and not bound:
                        msg = "metadata kfuncs require device-bound program"
            if msg is not None:
                self.pc = pc
                self.processed = self.nstates = 0
                self.log = []
                self.state = None
                raise self._error(Refuse(msg, errno.EINVAL))
        return out

    @staticmethod
    def _writes_dst(i: Instruction) -> bool:
        return (i.code & 7) in (op.BPF_ALU, op.BPF_ALU64, op.BPF_LDX) or \
            i.code == op.OP_LD_IMM64 or op.is_atomic_load(i.code, i.imm)

    # -- entry --------------------------------------------------------------------------
    def run(self) -> VerifierResult:
        for k in self.spec.kfuncs if self.syscall else ():
            if not syscall_verified(k.name):
                raise UnsupportedHelper(f"{self.spec.name}: kfunc {k.name} in a syscall "
                                        "program is not modelled by pyxdp", pc=k.pc)
        try:
            self._check_kfunc_calls()
            self._find_exception_cb()
            self._check_abnormal_return()
            self._check_map_fds()
            self._check_cfg()
            self._mark_fastcall_patterns()
            if self.syscall and not self.spec.flags & BPF_F_SLEEPABLE:  # check_attach_btf_id
                self.pc = 0
                raise Refuse("Syscall programs can only be sleepable", errno.EINVAL)
            if not self.syscall and self.spec.flags & BPF_F_SLEEPABLE:  # can_be_sleepable
                self.pc = 0
                raise Refuse("Only fentry/fexit/fmod_ret, lsm, iter, uprobe, and struct_ops "
                             "programs can be sleepable", errno.EINVAL)
            self._do_check()
            self._check_global_subprogs()
            self._remove_fastcall_spills()
            self._check_max_stack_depth()
            self._check_throw_in_callbacks()
            if self.kfunc_zero_reached:  # fixup_kfunc_call (dead code was removed first)
                self.pc = min(self.kfunc_zero)
                raise Refuse("invalid kernel function call not eliminated in verifier pass",
                             errno.EINVAL)
        except Refuse as e:
            raise self._error(e) from None
        depth = tuple(self.depth[s] for s in self.subprogs)
        self.log.append(f"processed {self.processed} insns (limit {self.limit}) "
                        f"max_states_per_insn 0 total_states {self.nstates} peak_states "
                        f"{self.nstates} mark_read 0")
        return VerifierResult(self.processed, self.nstates, depth, "\n".join(self.log),
                              self.facts.result())

    def _error(self, e: Refuse) -> VerifierError:
        src = self.spec.source_line(self.pc) or ""
        raw = self.spec.insns  # as given: the walk's copy has refused fields cleared
        text = format_insn(raw, self.pc) if self.pc < len(raw) else ""
        regs = ""
        if self.state is not None:
            f = self.state.cur
            regs = " ".join(f"R{i}={r.describe()}" for i, r in enumerate(f.regs)
                            if r.t != NOT_INIT)
        li = self.spec.line_info_at(self.pc)
        if li is not None and li.line:
            self.log.append(f"; {li.text.strip()} @ {li.file_name.rsplit('/', 1)[-1]}:"
                            f"{li.line}")
        self.log.append(f"{self.pc}: ({raw[self.pc].code:02x}) {text}"
                        if text else "")
        if regs and e.msg:  # (a refusal Linux does not explain ends at the instruction)
            self.log.append(regs)
        stats = (f"processed {self.processed} insns (limit {self.limit}) max_states_per_insn "
                 f"0 total_states {self.nstates} peak_states {self.nstates} mark_read 0")
        if e.glued:
            self.log.append(e.msg + stats)
        else:
            self.log.extend((e.msg, stats))
        return VerifierError(self.spec.name, e.err, "\n".join(x for x in self.log if x),
                             pc=self.pc, insn=text, source=src, state=regs)

    def _check_map_ref(self, ref: MapRef) -> None:
        """resolve_pseudo_ldimm64 on a map the loader bound: check_map_prog_compatibility
        for a sleepable program (a syscall program is one: only the map types of
        SLEEPABLE_MAPS), then a value reference's offset and map_direct_value_addr (an
        array's of one entry only)."""
        m = self.maps.get(ref.map_name)
        if m is None:
            return
        self.pc = ref.pc
        if self.syscall and m.type not in SLEEPABLE_MAPS:
            raise Refuse("Sleepable programs can only use array, hash, ringbuf and local "
                         "storage maps", errno.EINVAL)
        if ref.kind != "value":
            return
        off = ref.offset & U32
        if off >= BPF_MAX_VAR_OFF:
            raise Refuse(f"direct value offset of {off} is not allowed", errno.EINVAL)
        if m.type != MT.BPF_MAP_TYPE_ARRAY:
            raise Refuse("no direct value access support for this map type", errno.EINVAL)
        if m.max_entries != 1 or off >= m.value_size:
            raise Refuse(f"invalid access to map value pointer, value_size={m.value_size} "
                         f"off={off}", ENOTSUPP if m.max_entries != 1 else errno.EINVAL)

    # -- add_subprog_and_kfunc: what every kfunc call needs ---------------------------------
    def _check_kfunc_calls(self) -> None:
        for k in self.spec.kfuncs:
            self.pc = k.pc
            if not self.gpl:
                raise Refuse("cannot call kernel function from non-GPL compatible program",
                             errno.EINVAL)
            proto = KFUNCS.get(k.name)
            bound = bool(self.spec.ifindex and self.spec.flags & BPF_F_XDP_DEV_BOUND_ONLY)
            if proto is not None and proto.metadata and not bound:
                raise Refuse("metadata kfuncs require device-bound program", errno.EINVAL)
        self.pc = 0

    def _find_exception_cb(self) -> None:
        """bpf_find_exception_callback_insn_off: the global function an
        ``exception_callback:NAME`` decl tag on the main function names, found through
        func_info; then add_subprog's boundary as check_subprogs checks it. The callback
        is verified as a called global function whose R1 is the cookie (a scalar)."""
        spec, btf = self.spec, self.btf
        try:
            start = exception_callback(spec, btf)
        except ExceptionCallbackError as e:
            raise Refuse(e.message, e.errno) from None
        if not start:
            return
        assert btf is not None
        fid = next(fi.type_id for fi in spec.func_info if fi.insn_off == start)
        fn = btf.type_by_id(fid)
        name = fn.name
        if start >= len(self.insns):
            raise InvalidProgram(f"{spec.name}: func_info names pc {start}, past the "
                                 "program's end", pc=start, rule="func-info")
        if start not in self.subprogs:  # add_subprog: a function of its own from here
            lo, hi = self.layout.function_of(start)
            second = {pc + 1 for pc, i in enumerate(self.insns) if i.code == op.OP_LD_IMM64}
            for pc in range(lo, hi):
                if pc in second:
                    continue
                target = _succs(self.insns, pc)[-1] if self.insns[pc].code & 7 in (
                    op.BPF_JMP, op.BPF_JMP32) and self.insns[pc].code & 0xF0 not in (
                    op.BPF_EXIT, op.BPF_CALL) else None
                if target is not None and (pc < start) != (target < start):
                    self.pc = pc
                    raise Refuse(f"jump out of range from insn {pc} to {target}",
                                 errno.EINVAL)
            if self.insns[start - 1].code not in (op.OP_EXIT, op.OP_JA, op.OP_JA32):
                self.pc = start - 1
                raise Refuse("last insn is not an exit or jmp", errno.EINVAL)
        self.exc_cb = start
        self.depth.setdefault(start, 0)
        if start not in self.starts:  # a function of its own for stack liveness too
            self.starts.add(start)
            self.stack_live = StackLiveness(self.succ, sorted(self.starts), self.cb_sites)
        index = sorted(self.starts).index(start)
        g = self.globals.get(start)
        if g is None:
            g = self.globals[start] = _Global(index, name, fn.type, fid)
        g.called = True  # do_check_subprogs verifies it though nothing calls it

    def _has_tail_call(self, sub: int) -> bool:
        start, end = next(f for f in self.layout.functions if f[0] == sub)
        return any(self.insns[pc].code == op.OP_CALL and self.insns[pc].imm == 12 and
                   self.insns[pc].src == op.CallSrc.BPF_HELPER_CALL for pc in range(start, end))

    def _check_map_fds(self, end: int | None = None) -> None:
        """resolve_pseudo_ldimm64 (on the instructions before ``end``): a map load the
        loader bound to no map keeps the raw fd of the program's text, which names no
        map of this process (EINVAL for an open file that is not a map, EBADF for none)."""
        for pc, i in enumerate(self.insns[:end]):
            if i.code != op.OP_LD_IMM64:
                continue
            if pc in self.map_at:
                self._check_map_ref(self.map_at[pc])
                continue
            if i.src in (op.PseudoSrc.BPF_PSEUDO_MAP_IDX, op.PseudoSrc.BPF_PSEUDO_MAP_IDX_VALUE):
                self.pc = pc  # pyxdp passes no fd_array
                raise Refuse("fd_idx without fd_array is invalid", errno.EPROTO)
            if i.src == op.PseudoSrc.BPF_PSEUDO_BTF_ID and pc + 1 < len(self.insns) and \
                    self.insns[pc + 1].imm:  # pyxdp has no BTF objects of kernel modules
                self.pc = pc
                raise Refuse("invalid module BTF object FD specified.", errno.EINVAL)
            if i.src == op.PseudoSrc.BPF_PSEUDO_BTF_ID and pc + 1 < len(self.insns) and \
                    not self.insns[pc + 1].imm:
                # check_pseudo_btf_id on vmlinux's BTF (id 0 is void, a type too)
                self.pc = pc
                kernel = core_target(self.core_btf)
                btf_id = i.imm & U32
                if btf_id >= len(kernel):
                    raise Refuse(f"ldimm64 insn specifies invalid btf_id {i.imm}.",
                                 errno.ENOENT)
                if btf_id == 0 or kernel.type_by_id(btf_id).kind not in (BtfKind.VAR,
                                                                         BtfKind.FUNC):
                    raise Refuse(f"pseudo btf_id {i.imm} in ldimm64 isn't KIND_VAR or "
                                 "KIND_FUNC", errno.EINVAL)
                name = kernel.type_by_id(btf_id).name
                if not _kallsyms_has(name):
                    raise Refuse("ldimm64 failed to find the address for kernel symbol "
                                 f"'{name}'.", errno.ENOENT)
                _ksym_reg(kernel, btf_id)  # (a size it cannot resolve is refused here)
            if i.src not in (op.PseudoSrc.BPF_PSEUDO_MAP_FD, op.PseudoSrc.BPF_PSEUDO_MAP_VALUE):
                continue
            self.pc = pc
            if i.src == op.PseudoSrc.BPF_PSEUDO_MAP_FD and pc + 1 < len(self.insns) and \
                    self.insns[pc + 1].imm:
                raise Refuse("unrecognized bpf_ld_imm64 insn", errno.EINVAL)
            try:
                os.fstat(i.imm)
                err = errno.EINVAL
            except (OSError, OverflowError):
                err = errno.EBADF
            raise Refuse(f"fd {i.imm} is not pointing to valid bpf_map", err)
        self.pc = 0

    def _has_ld_abs(self, sub: int) -> bool:
        start, end = next(f for f in self.layout.functions if f[0] == sub)
        return any(self.insns[pc].code & 7 == op.BPF_LD and
                   op.bpf_mode(self.insns[pc].code) in (op.BPF_ABS, op.BPF_IND)
                   for pc in range(start, end))

    def _check_abnormal_return(self) -> None:
        """check_abnormal_return: without func_info no function but the main one may use
        LD_ABS or tail call; check_btf_func: with it, only one returning an integer or
        enum may."""
        if not self.spec.func_info:
            for sub in self.subprogs[1:]:
                if self._has_ld_abs(sub):
                    raise Refuse("LD_ABS is not allowed in subprogs without BTF", errno.EINVAL)
                if self._has_tail_call(sub):
                    raise Refuse("tail_call is not allowed in subprogs without BTF",
                                 errno.EINVAL)
            return
        if self.btf is None:
            return
        for fi in self.spec.func_info:
            if not fi.insn_off or fi.insn_off not in self.subprogs:
                continue
            fn = self.btf.type_by_id(fi.type_id)
            proto = self.btf.type_by_id(fn.size_type) if fn.kind is BtfKind.FUNC else None
            if proto is None or proto.kind is not BtfKind.FUNC_PROTO:
                continue
            ret = self.btf.resolved(proto.size_type) if proto.size_type else None
            if ret is not None and (ret.kind in (BtfKind.ENUM, BtfKind.ENUM64) or (
                    ret.kind is BtfKind.INT and ret.size_type <= 8)):
                continue
            if self._has_ld_abs(fi.insn_off):
                raise Refuse("LD_ABS is only allowed in functions that return 'int'.",
                             errno.EINVAL)
            if self._has_tail_call(fi.insn_off):
                raise Refuse("tail_call is only allowed in functions that return 'int'.",
                             errno.EINVAL)

    # -- check_cfg: every instruction reachable ---------------------------------------------
    def _check_cfg(self) -> None:
        n = len(self.insns)
        seen = [False] * n
        roots = list(self.subprogs) + ([self.exc_cb] if self.exc_cb is not None else [])
        todo = list(roots)
        for pc in roots:
            seen[pc] = True
        while todo:
            pc = todo.pop()
            i = self.insns[pc]
            succ = list(_succs(self.insns, pc))
            if i.code == op.OP_LD_IMM64 and i.src == op.PseudoSrc.BPF_PSEUDO_FUNC:
                succ.append(pc + 1 + i.imm)
            for s in succ:
                if 0 <= s < n and not seen[s]:
                    seen[s] = True
                    todo.append(s)
        pc = 0
        while pc < n:
            if not seen[pc]:
                self.pc = pc
                raise Refuse(f"unreachable insn {pc}", errno.EINVAL)
            if self.insns[pc].code == op.OP_LD_IMM64:
                if pc + 1 < n and seen[pc + 1]:
                    self.pc = pc
                    raise Refuse(f"jump into the middle of ldimm64 insn {pc}", errno.EINVAL)
                pc += 2
            else:
                pc += 1

    # -- states ---------------------------------------------------------------------------
    def _jh_push(self, st: State) -> None:
        """push_jmp_history: one entry per instruction, however many reasons it has."""
        if self.jh_at != self.processed:
            self.jh_at = self.processed
            st.jh += 1

    def _new_id(self) -> int:
        self.id_gen += 1
        return self.id_gen

    def _init_state(self) -> State:
        st = State()
        f = Frame(0, -1, 0)
        f.regs[1].set_ptr(CTX)
        st.frames.append(f)
        return st

    def _do_check(self, st: State | None = None, pc: int = 0) -> None:
        if st is None:
            st = self._init_state()
        stack: list[tuple[State, int]] = []
        self.paths = stack
        insns, prune, limit, jmp_point = self.insns, self.prune, self.limit, self.jmp_point
        live = self.stack_live
        reserved = self.encoding.reached
        # the instruction classes as locals (dispatched on every instruction)
        alu, alu64, ldx, st_, stx, ld = op.BPF_ALU, op.BPF_ALU64, op.BPF_LDX, op.BPF_ST, \
            op.BPF_STX, op.BPF_LD
        while True:
            self.state = st
            self.pc = pc
            self.processed += 1
            if self.processed > limit:
                raise Refuse(f"BPF program is too large. Processed {self.processed} insn",
                             errno.E2BIG)
            if prune[pc] and self._visited(pc, st):
                nxt = self._finish(st, stack)
                if nxt is None:
                    return
                st, pc = nxt
                continue
            if jmp_point[pc]:
                st.jh += 1
                self.jh_at = self.processed
            st.hist.append(pc)
            if reserved and pc in reserved:  # do_check's reserved-field checks
                raise Refuse(reserved[pc], errno.EINVAL)
            i = insns[pc]
            walked, nframes, at = st, len(st.frames), pc
            cls = i.code & 7
            if cls == alu or cls == alu64:
                self._alu(st.frames[-1].regs, i)
                pc += 1
            elif cls == ldx:
                self._ldx(st, i)
                pc += 1
            elif cls == stx or cls == st_:
                self._store(st, i)
                pc += 1
            elif cls == ld:
                self._ld(st, i, pc)
                pc += 2
            else:  # BPF_JMP, BPF_JMP32
                self.jmps += 1
                o = i.code & 0xF0
                if o == op.BPF_CALL:
                    pc = self._call(st, i, pc, stack)
                    if pc < 0:  # bpf_throw: the path ends as at the main program's exit
                        nxt = self._finish(st, stack)
                        if nxt is None:
                            return
                        st, pc = nxt
                elif o == op.BPF_EXIT:
                    ret = self._exit(st, pc)
                    if ret is None:
                        nxt = self._finish(st, stack)
                        if nxt is None:
                            return
                        st, pc = nxt
                    else:
                        pc = ret
                elif o == op.BPF_JA:
                    pc += 1 + (i.imm if cls == op.BPF_JMP32 else i.off)
                elif o == BPF_JCOND and cls == op.BPF_JMP:
                    pc = self._may_goto(st, i, pc, stack)
                else:
                    pc = self._cond_jmp(st, i, pc, stack)
            if st is walked and len(st.frames) == nframes:
                # StackLiveness.commit's common case (nothing written, nothing to
                # commit at ``at``) without the call
                inst = live.cur
                if inst is None or live.writes or not inst.written_once[at - inst.start] \
                        or inst.wrote[at - inst.start]:
                    live.commit(st.frames, at)
            elif st is walked:  # a call or a return: the chain changed
                self.stack_live.reset()
                if len(st.frames) < nframes:
                    self.stack_live.update(st.frames)

    def _finish(self, st: State, stack: list[tuple[State, int]]) -> tuple[State, int] | None:
        """A path ended (exit or pruned): update branch counts, pop the next path."""
        p = st.parent
        while p is not None:
            p.branches -= 1
            if p.branches:
                break
            if self.entry_of:
                chain = self.entry_of.pop(p, None)
                if chain is not None:  # maybe_exit_scc: the loop's visit is over
                    del self.visit_entry[chain]
                    self.visits[chain] = 0
                    self._propagate_backedges(chain)
            p = p.parent
        self.stack_live.reset()
        if not stack:
            return None
        st, pc = stack.pop()
        self.stack_live.update(st.frames)
        return st, pc

    def _push(self, st: State, pc: int, stack: list[tuple[State, int]],
              err: int = errno.EFAULT, what: str = "") -> None:
        """push_stack: queue ``st`` at ``pc``. Past BPF_COMPLEXITY_LIMIT_JMP_SEQ pending
        states 6.18's push_stack fails with NULL and each caller picks the errno: EFAULT
        for a conditional jump, ENOMEM for may_goto, an iterator's _next and a callback,
        EFAULT for an async callback (" for async cb." in its line)."""
        if len(stack) >= BPF_COMPLEXITY_LIMIT_JMP_SEQ:  # push_stack counts the one refused
            raise Refuse(f"The sequence of {BPF_COMPLEXITY_LIMIT_JMP_SEQ + 1} jumps is too "
                         f"complex{what}.", err)
        if st.parent is not None:
            st.parent.branches += 1
        stack.append((st, pc))

    def _visited_plain(self, pc: int, cur: State, live: int) -> bool:
        """is_state_visited at a pc that is no forced checkpoint: the states kept here, the
        newest first (Linux's list order), finished ones compared for pruning, those still
        on the current path for an infinite loop; a state missed while a new one would be
        kept counts the miss, and one that misses far more often than it hits is dropped."""
        jumps, insns = self.jmps - self.prev_jmps, self.processed - self.prev_insns
        # a long jmp_history forces a checkpoint (so does it in a loop, below)
        force = cur.jh > 40
        add = force or (jumps >= 2 and insns >= 8)
        kept = self.kept.get(pc)
        if kept:
            key: tuple[object, ...] | None = None
            evict = False
            cs = cur.frames[-1].callsite
            for k in range(len(kept) - 1, -1, -1):
                old = kept[k]
                if old.frames[-1].callsite != cs and self._other_list(pc, old, cs):
                    continue
                if old.branches:
                    if key is None:
                        key = tuple(r.key() for r in cur.cur.regs)
                    if old.loop_key is None:
                        old.loop_key = tuple(r.key() for r in old.cur.regs)
                    if old.loop_key == key and old.may_goto == cur.may_goto and \
                            old.cb_unroll == cur.cb_unroll and \
                            self._states_equal(old, cur, live, exact=True):
                        raise Refuse(f"infinite loop detected at insn {pc}", errno.EINVAL)
                    if not force and jumps < 20 and insns < 100:
                        add = False
                elif self._states_equal(old, cur, live, exact=False):
                    old.hits += 1
                    if self.loose:
                        self._propagate_precision(old, cur)
                    else:  # in a loop old's marks may not be complete yet
                        self._propagate_precision(old, cur)
                        self._backedge(old, pc, cur)
                    if evict:
                        self._evict(kept)
                    return True
                if add:
                    old.misses += 1
                    evict |= old.misses > old.hits * 3 + 3
            if evict:
                self._evict(kept)
        if not add:
            return False
        self.prev_jmps, self.prev_insns = self.jmps, self.processed
        new = self._keep(pc, cur)
        self.kept.setdefault(pc, []).append(new)
        self.nstates += 1
        if self.scc[pc] or len(cur.frames) > 1:
            self._enter(new, pc)
        return False

    @staticmethod
    def _evict(kept: list[State]) -> None:
        """Linux frees a kept state that misses far more often than it hits (on the
        current path or not: it is neither compared nor checked for a loop again)."""
        kept[:] = [x for x in kept if x.misses <= x.hits * 3 + 3]

    def _keep(self, pc: int, cur: State) -> State:
        """Checkpoint ``cur``: a copy becomes its parent, kept at ``pc``."""
        # the history so far becomes new's (moved, not copied)
        hist, links = cur.hist, cur.links
        cur.hist, cur.links, cur.jh = [], {}, 0
        new = cur.copy()
        new.hist, new.links = hist, links
        new.branches = 1
        new.parent = cur.parent
        new.pc = pc
        cur.parent = new
        for f in cur.frames:  # forget the marks inherited (they live in ``new``)
            for r in f.regs:
                r.precise = False
            for spi, (_, spill) in enumerate(f.stack):
                if spill is not None and spill.precise:
                    f.spill_w(spi).precise = False  # type: ignore[union-attr]
        return new

    def _callchain(self, cur: State, pc: int) -> tuple[int, ...] | None:
        """compute_scc_callchain: the loop a state at ``pc`` belongs to is the one of its
        outermost frame inside a loop (the frame's pc, or for a caller its call), named
        with the calls of the frames outside it; None outside loops."""
        frames = cur.frames
        last = len(frames) - 1
        if not last:
            return (self.scc[pc],) if self.scc[pc] else None
        for i in range(last + 1):
            at = pc if i == last else frames[i + 1].callsite
            if self.scc[at]:
                return tuple(frames[k + 1].callsite for k in range(i)) + (self.scc[at],)
        return None

    def _incomplete_marks(self, cur: State, pc: int) -> bool:
        """incomplete_read_marks: the state's loop visit has had loop hits (backedges)
        whose marks are not yet handed back."""
        if not self.visits:
            return False
        chain = self._callchain(cur, pc)
        return chain is not None and self.visits.get(chain, 0) > 0

    def _backedge(self, old: State, pc: int, cur: State) -> None:
        """add_scc_backedge: a loop hit of ``cur`` on ``old`` at ``pc``; once the loop's
        visit ends, what ``old`` then needs precise is handed to ``cur`` again."""
        chain = self._callchain(old, pc)
        if chain is not None:
            self.visits[chain] = self.visits.get(chain, 0) + 1
            self.backedges.setdefault(chain, []).append((old, cur, pc))

    def _propagate_backedges(self, chain: tuple[int, ...]) -> None:
        """propagate_backedges: hand each loop hit's state the marks its equal state
        gained since, until nothing changes."""
        edges = self.backedges.pop(chain, [])
        if not edges:
            return
        pc = self.pc
        while True:
            self.prec_round += 1  # marks changed: collect finished states' marks anew
            before = self._marks(edges)
            for old, cur, at in edges:
                self.pc = at
                self._propagate_precision(old, cur)
            if self._marks(edges) == before:
                break
        self.pc = pc

    @staticmethod
    def _marks(edges: list[tuple[State, State, int]]) -> int:
        """How many precise scalars the checkpoints of the loop hits' states hold."""
        n = 0
        seen: set[int] = set()
        for _, cur, _ in edges:
            p = cur.parent
            while p is not None and id(p) not in seen:
                seen.add(id(p))
                n += sum(1 for r in p.all_regs() if r.t == SCALAR and r.precise)
                p = p.parent
        return n

    def _enter(self, new: State, pc: int) -> None:
        """maybe_enter_scc: a kept state in a loop enters its visit if none is going on."""
        chain = self._callchain(new, pc)
        if chain is not None and chain not in self.visit_entry:
            self.visit_entry[chain] = new
            self.entry_of[new] = chain

    def _visited(self, pc: int, cur: State) -> bool:
        """is_state_visited: prune when a finished state covers ``cur``; an equal state on
        the current path is an infinite loop; keep ``cur`` now and then."""
        live = self.live[pc]
        if pc not in self.forced:
            # a loop whose marks may be incomplete compares every scalar's range and slot
            self.loose = not (self.visits and self._incomplete_marks(cur, pc))
            return self._visited_plain(pc, cur, live)
        return self._visited_forced(pc, cur, live)

    def _other_list(self, pc: int, old: State, cs: int) -> bool:
        """explored_state: Linux keeps the states of ``pc`` in the list of a hash of ``pc``
        and the current frame's callsite (modulo the program's length), so a state kept
        at another call of the function is not seen at all (not for pruning, a loop or a
        miss) unless both hash alike."""
        n = len(self.insns)
        return ((pc ^ old.frames[-1].callsite) & U32) % n != ((pc ^ cs) & U32) % n

    def _visited_forced(self, pc: int, cur: State, live: int) -> bool:
        """is_state_visited at a forced checkpoint (an iterator's _next call, may_goto, a
        callback's call): every state kept here, the newest first. One still on the
        current path covers ``cur`` when ``cur`` is within it (RANGE_WITHIN: the loop
        converges) - for may_goto one of another depth, for an iterator while it is
        active; a finished one as anywhere. A state that misses far more often than it
        hits is dropped (one on the current path after 64 misses per hit). ``cur`` is
        always kept."""
        kept = self.kept.setdefault(pc, [])
        key = tuple(r.key() for r in cur.cur.regs)
        may_goto = pc in self.may_goto
        cb_site = pc in self.cb_sites
        it = self._iter_at(cur) if pc in self.iter_next else None
        converge = it is None or it.sub == ITER_ACTIVE
        evict: list[State] = []
        cs = cur.frames[-1].callsite
        for k in range(len(kept) - 1, -1, -1):
            old = kept[k]
            if old.frames[-1].callsite != cs and self._other_list(pc, old, cs):
                continue
            if old.branches:
                self.loose = False
                if converge and (not may_goto or old.may_goto != cur.may_goto) and \
                        self._states_equal(old, cur, live, exact=False):
                    old.hits += 1
                    if cb_site:
                        # Linux 6.18 records no backedge here: only the marks old has
                        # so far are handed on
                        self._propagate_precision(old, cur)
                    else:
                        self._propagate_precision(old, cur)
                        self._backedge(old, pc, cur)
                    self._evict_forced(kept, evict)
                    return True
                if may_goto:
                    if old.loop_key is None:
                        old.loop_key = tuple(r.key() for r in old.cur.regs)
                    if old.loop_key == key and old.may_goto == cur.may_goto and \
                            old.cb_unroll == cur.cb_unroll and \
                            self._states_equal(old, cur, live, exact=True):
                        raise Refuse(f"infinite loop detected at insn {pc}", errno.EINVAL)
            else:
                # finished states compare as anywhere (incomplete_read_marks): NOT_EXACT
                # unless the point is inside a loop whose marks may be incomplete (a
                # callback's call is no loop of its own; a may_goto outside any loop is
                # a plain branch)
                self.loose = not self._incomplete_marks(cur, pc)
                if self._states_equal(old, cur, live, exact=False):
                    old.hits += 1
                    if self.loose:
                        self._propagate_precision(old, cur)
                    else:
                        self._propagate_precision(old, cur)
                        self._backedge(old, pc, cur)
                    self._evict_forced(kept, evict)
                    return True
            old.misses += 1
            n = 64 if old.branches else 3
            if old.misses > old.hits * n + n:
                evict.append(old)
        self._evict_forced(kept, evict)
        # a forced checkpoint: always kept
        self.prev_jmps, self.prev_insns = self.jmps, self.processed
        new = self._keep(pc, cur)
        new.loop_key = key
        kept.append(new)
        self.nstates += 1
        self._enter(new, pc)
        return False

    @staticmethod
    def _evict_forced(kept: list[State], evict: list[State]) -> None:
        """Linux frees a kept state that misses far more often than it hits (at a forced
        checkpoint one still on the current path after 64 misses per hit)."""
        if evict:
            kept[:] = [x for x in kept if all(x is not e for e in evict)]

    # -- precision tracking (mark_chain_precision, backtrack_insn) ------------------------
    def _mark_precise(self, st: State, regs: Iterable[int] = (),
                      slots: Iterable[tuple[int, int]] = ()) -> None:
        """The scalars in ``regs`` (of the current frame) and stack ``slots`` ((frame, spi))
        decide a verdict at this instruction: walk the history back and mark, in each
        checkpoint on the way, the scalars they were computed from as precise. Where the
        walk meets what it does not follow (calls, exits, atomics), every scalar of every
        checkpoint becomes precise (mark_all_scalars_precise), which is always safe."""
        top = len(st.frames) - 1
        want_r = {(top, r) for r in regs if st.cur.regs[r].t == SCALAR}
        want_s = set(slots)
        if not want_r and not want_s:
            return
        self._backtrack(st, want_r, want_s, skip_last=True)

    def _backtrack(self, st: State, want_r: set[tuple[int, int]],
                   want_s: set[tuple[int, int]], *, skip_last: bool) -> None:
        cur: State | None = st
        nxt = self.pc  # the pc run after the newest history entry
        while cur is not None:
            fr: int | None = len(cur.frames) - 1
            hist = cur.hist
            n = len(hist) - (1 if skip_last else 0)
            skip_last = False
            links = cur.links
            bt_dst = self.bt_dst
            for k in range(n - 1, -1, -1):
                h = hist[k]
                assert fr is not None
                link = links.get(k) if links else None
                pc = h & _HIST_PC
                d = bt_dst[pc]
                if d >= 0 and not link and (fr, d) not in want_r:
                    nxt = pc  # _backtrack_insn would change nothing
                    continue
                if link:
                    self._sync_linked(link, want_r, want_s)
                fr = self._backtrack_insn(h, fr, nxt, want_r, want_s)
                if fr is None:
                    self._mark_all_precise(st)
                    return
                if link:
                    self._sync_linked(link, want_r, want_s)
                if not want_r and not want_s:
                    return
                nxt = h & _HIST_PC
            parent = cur.parent
            if parent is None:
                return
            if fr != len(parent.frames) - 1:
                self._mark_all_precise(st)
                return
            for key in list(want_r):
                reg = parent.frames[key[0]].regs[key[1]]
                if reg.t != SCALAR or reg.precise:
                    want_r.discard(key)
                    continue
                reg.precise = True
            for key in list(want_s):
                f, spi = key
                types, spill = parent.frames[f].slot(spi)
                if spill is None or spill.t != SCALAR or S_SPILL not in types or spill.precise:
                    want_s.discard(key)
                    continue
                parent.frames[f].spill_w(spi).precise = True  # type: ignore[union-attr]
            if not want_r and not want_s:
                return
            nxt = parent.pc
            cur = parent

    @staticmethod
    def _sync_linked(link: tuple[tuple[int, int], ...], want_r: set[tuple[int, int]],
                     want_s: set[tuple[int, int]]) -> None:
        """bt_sync_linked_regs: scalars bounded together at a jump; one wanted, all."""
        if not any((f, x) in want_r if x >= 0 else (f, -1 - x) in want_s for f, x in link):
            return
        for f, x in link:
            if x >= 0:
                want_r.add((f, x))
            else:
                want_s.add((f, -1 - x))

    def _backtrack_insn(self, h: int, fr: int, nxt: int, want_r: set[tuple[int, int]],
                        want_s: set[tuple[int, int]]) -> int | None:
        """backtrack_insn: what instruction ``h`` (a history entry, run in frame ``fr``
        as seen after it, followed by pc ``nxt``) read to produce what is wanted after it.
        The frame before it, or None: give up (mark everything precise)."""
        pc = h & _HIST_PC
        i = self.insns[pc]
        cls = i.code & 7
        dst, src = (fr, i.dst), (fr, i.src)
        if cls in (op.BPF_ALU, op.BPF_ALU64):
            o = i.code & 0xF0
            if o in (op.BPF_NEG, op.BPF_END) or dst not in want_r:
                return fr
            if o == op.BPF_MOV:
                want_r.discard(dst)
            if i.code & op.BPF_X:
                want_r.add(src)
            return fr
        if cls == op.BPF_LDX or op.is_atomic_load(i.code, i.imm):
            if dst not in want_r:
                return fr
            want_r.discard(dst)
            if h & _HIST_STACK:
                want_s.add(((h >> 21) & 7, h >> 24))
            return fr
        if cls in (op.BPF_ST, op.BPF_STX):
            if dst in want_r:
                # the address of a store wanted as a scalar: the walk met a pointer
                # subtraction (r9 -= r4 of two packet pointers) and gives up
                return None
            if i.code & 0xE0 == op.BPF_ATOMIC and not op.is_atomic_store(i.code, i.imm):
                if h & _HIST_STACK:
                    return None  # an atomic on a stack slot: not followed
                # the fetched old value comes from memory, as a load's does
                if i.imm == op.BPF_CMPXCHG:
                    want_r.discard((fr, 0))
                elif i.imm & op.BPF_FETCH:
                    want_r.discard(src)
                return fr
            if not h & _HIST_STACK:
                return fr
            slot = ((h >> 21) & 7, h >> 24)
            if slot not in want_s:
                return fr
            want_s.discard(slot)
            if cls == op.BPF_STX:
                want_r.add(src)
            return fr
        if cls == op.BPF_LD:
            if i.code != op.OP_LD_IMM64:
                return None
            want_r.discard(dst)
            return fr
        o = i.code & 0xF0
        if o == op.BPF_CALL:
            if i.src == op.CallSrc.BPF_PSEUDO_CALL and pc + 1 + i.imm not in self.globals:
                # back out of the callee to the caller: its arguments were the caller's
                for r in range(11):
                    if (fr, r) in want_r:
                        want_r.discard((fr, r))
                        if 1 <= r <= 5:
                            want_r.add((fr - 1, r))
                for slot in [x for x in want_s if x[0] >= fr]:
                    want_s.discard(slot)  # the callee's stack did not exist before
                return fr - 1
            if pc in self.cb_sites and nxt != pc + 1:
                # back out of the callback's frame to the helper's call: its R1-R5
                # were set by the helper, nothing else of the callback can be wanted
                if any(f == fr and not 1 <= r <= 5 for f, r in want_r) or \
                        any(f >= fr for f, _ in want_s):
                    return None
                for r in range(1, 6):
                    want_r.discard((fr, r))
                return fr - 1
            if i.imm == 12 and nxt != pc + 1 and i.src == op.CallSrc.BPF_HELPER_CALL:
                # a tail call that left the subprogram, as its exit would: R0 came from
                # the tail-called program
                want_r.discard((fr, 0))
                return self._backtrack_exit(fr, nxt, want_r)
            if any((fr, r) in want_r for r in range(1, 6)):
                return None
            want_r.discard((fr, 0))  # a helper's, kfunc's or global function's result
            return fr
        if o == op.BPF_EXIT:
            return self._backtrack_exit(fr, nxt, want_r)
        if o == op.BPF_JA or o == BPF_JCOND:
            return fr
        if i.code & op.BPF_X and (dst in want_r or src in want_r):
            want_r.add(dst)
            want_r.add(src)
        return fr

    def _backtrack_exit(self, fr: int, nxt: int, want_r: set[tuple[int, int]]) -> int | None:
        """backtrack_insn at a function's exit (followed by ``nxt`` in the caller): the
        frame before it is the callee's."""
        if nxt in self.cb_sites:
            # back into a callback that returned to its helper's call: the caller's
            # R0-R5 are set by the call again, its R6-R9 and slots stay wanted
            for r in range(6):
                want_r.discard((fr, r))
            return fr + 1
        # back into the callee that returned to nxt: R0 is its R0, R1-R5 were clobbered
        call = self.insns[nxt - 1] if nxt > 0 else None
        if call is None or call.code != op.OP_CALL or \
                call.src != op.CallSrc.BPF_PSEUDO_CALL or \
                any((fr, r) in want_r for r in range(1, 6)):
            return None
        if (fr, 0) in want_r:
            want_r.discard((fr, 0))
            want_r.add((fr + 1, 0))
        return fr + 1

    # -- stack liveness (liveness.c) --------------------------------------------------------
    def _stack_read(self, st: State, frame: int, spi: int) -> None:
        """bpf_mark_stack_read: the instruction walked may read slot ``spi`` of
        ``frame``."""
        self.stack_live.read(st.frames, frame, self.pc, spi)

    def _stack_read_range(self, st: State, frame: int, lo: int, hi: int) -> None:
        for spi in range((-hi) // 8 if hi < 0 else 0, (-lo - 1) // 8 + 1):
            self._stack_read(st, frame, spi)

    def _alive(self, old: State) -> list[int]:
        """The slots a finished state compares (clean_verifier_state): live at its pc,
        as the stack liveness has it when the state is first compared."""
        if old.alive is None:
            old.alive = self.stack_live.alive(old.frames, old.pc)
        return old.alive

    def _mark_all_precise(self, st: State) -> None:
        """mark_all_scalars_precise: every scalar of ``st``'s checkpoints."""
        p = st.parent
        while p is not None and not p.all_precise:
            p.all_precise = True
            for r in p.all_regs():
                if r.t == SCALAR:
                    r.precise = True
            p = p.parent

    def _propagate_precision(self, old: State, cur: State) -> None:
        """propagate_precision: ``cur`` is safe because ``old`` was; what ``old`` needed
        precise, ``cur``'s checkpoints need too."""
        # a finished state's marks change only through a loop's backedges: collected once
        # per round of those
        prec = old.prec if old.prec_at == self.prec_round else None
        if old.branches:  # still on the current path: uncleaned, its marks as they are
            rs = [(fi, r) for fi, f in enumerate(old.frames) for r, reg in enumerate(f.regs)
                  if reg.t == SCALAR and reg.precise]
            ss = [(fi, spi) for fi, f in enumerate(old.frames)
                  for spi, (types, spill) in enumerate(f.stack)
                  if spill is not None and spill.t == SCALAR and spill.precise and
                  S_SPILL in types]
            prec = (tuple(rs), tuple(ss))
        elif prec is None:
            # only what old still holds once cleaned (clean_verifier_state): registers
            # live at its pc (a caller's: at its call), slots a path after it read
            rs, ss = [], []
            last = len(old.frames) - 1
            for fi, f in enumerate(old.frames):
                live = self.live[old.pc if fi == last else old.frames[fi + 1].callsite]
                for r, reg in enumerate(f.regs):
                    if reg.t == SCALAR and reg.precise and live >> r & 1:
                        rs.append((fi, r))
                for spi, (types, spill) in enumerate(f.stack):
                    if spill is not None and spill.t == SCALAR and spill.precise and \
                            S_SPILL in types and self._alive(old)[fi] >> spi & 1:
                        ss.append((fi, spi))
            prec = old.prec = (tuple(rs), tuple(ss))
            old.prec_at = self.prec_round
        if prec[0] or prec[1]:
            self._backtrack(cur, set(prec[0]), set(prec[1]), skip_last=False)

    @staticmethod
    def _iter_at(st: State) -> Reg | None:
        """The iterator R1 points to (an iterator _next call's argument)."""
        r1 = st.cur.regs[1]
        depth = -(r1.off + _s64(r1.tv))
        if r1.t != STACK or not r1.const or depth <= 0:
            return None  # at or above the frame pointer: no stack slot (the call refuses it)
        it = st.frames[r1.frame].slot((depth - 1) // 8)[1]
        return it if it is not None and it.t & 0xFF == ITER else None

    # -- widening imprecise scalars (widen_imprecise_scalars) -------------------------------
    def _widen(self, prev: State, q: State) -> None:
        """widen_imprecise_scalars: a scalar of ``q`` that is not exactly the previous
        iteration's (``prev``, kept at the same point) becomes unknown, unless either is
        precise (mark_chain_precision marked it: a path from ``prev`` relied on its
        value). The frames newest first, each one's registers, then its spilled slots,
        ids matched through one map as regs_exact does."""
        idmap: dict[int, int] = {}
        for fo, fc in zip(reversed(prev.frames), reversed(q.frames), strict=True):
            for r in range(11):  # MAX_BPF_REG
                o, c = fo.regs[r], fc.regs[r]
                if o.t == SCALAR and c.t == SCALAR and not (o.precise or c.precise) and \
                        not self._regsafe(o, c, idmap, exact=True):
                    c.set_unknown()
            for spi in range(min(len(fo.stack), len(fc.stack))):
                (ot, so), (ct, sc) = fo.stack[spi], fc.stack[spi]
                # is_spilled_reg: the slot's lowest byte (slot_type[7]) holds a spill
                if so is None or sc is None or ot[0] != S_SPILL or ct[0] != S_SPILL:
                    continue
                if so.t == SCALAR and sc.t == SCALAR and not (so.precise or sc.precise) and \
                        not self._regsafe(so, sc, idmap, exact=True):
                    fc.spill_w(spi).set_unknown()  # type: ignore[union-attr]

    def _plan(self, old: State, live: int) -> list[_FramePlan]:
        """What comparing a finished state at a loop-free pc looks at, once: per frame the
        registers that can fail (live ones that are not NOT_INIT; an imprecise scalar
        needs only a scalar, which the quick checks see) and the stack slots read after
        it that can fail (a slot of invalid and misc bytes matches anything)."""
        plan = []
        quick: list[tuple[Any, ...]] = []
        top = len(old.frames) - 1
        nframes = len(old.frames)
        alive = self._alive(old)
        slots_read = [_bits(alive[k]) for k in range(nframes)]
        masks = _MASKS
        for fi, fo in enumerate(old.frames):
            quick.append((0, fi, fo.callsite))
            regs = []
            fregs = fo.regs
            # a caller's registers: those live at its call (func_states_equal at
            # frame_insn_idx), as for the callee those live at old's pc
            for r in _bits((live if fi == top else self.live[old.frames[fi + 1].callsite])
                           & 0x7FF):
                o = fregs[r]
                t = o.t
                if t == NOT_INIT:
                    continue
                if t != SCALAR or o.precise:  # else any scalar will do (checked quick)
                    regs.append((r, o))
                # a finished state's registers no longer change: type and offset kept
                quick.append((1, fi, r, t, t == SCALAR, o.off))
            slots = []
            stack = fo.stack
            n = len(stack)
            for spi in slots_read[fi]:
                if spi >= n:
                    continue
                so = stack[spi]
                types, spill = so
                m = masks.get(types)
                mask, want = m if m is not None else _significant(types)
                if spill is None and not mask:
                    continue
                # _stack_scalar(so) is not None
                scalar = (types == _ALL_SPILL and spill is not None and spill.t == SCALAR) \
                    or types == _ALL_MISC
                # once the quick check passed, a slot without a register (but an
                # iterator's or IRQ flag's) has nothing left to compare
                if spill is not None or types[0] == S_ITER or types[0] == S_IRQ:
                    slots.append((spi, so, mask, want))
                quick.append((2, fi, spi, types, mask, want, scalar))
            plan.append((fo.callsite, tuple(regs), tuple(slots)))
        old.quick = quick
        return plan

    def _states_equal(self, old: State, cur: State, live: int, exact: bool) -> bool:
        frames = cur.frames
        if len(old.frames) != len(frames):
            return False
        # (the checks below have no side effects: the cheap, most often failing first)
        if not exact and self.loose and not old.branches:
            plan = old.plan
            if plan is None:
                plan = old.plan = self._plan(old, live)
            # A quick look first, without side effects: callsites, register types and
            # pointer offsets, the stack bytes old relied on (unless both slots hold
            # scalars). What failed moves to the front: the next state at this pc likely
            # differs from old in the same place.
            quick = old.quick
            for k, q in enumerate(quick):
                kind = q[0]
                if kind == 1:
                    c = frames[q[1]].regs[q[2]]
                    if c.t == q[3] and (q[4] or c.off == q[5]):
                        continue
                elif kind == 2:
                    cstack = frames[q[1]].stack
                    spi = q[2]
                    sc = cstack[spi] if spi < len(cstack) else _EMPTY
                    ct = sc[0]
                    if ct is q[3]:
                        continue
                    v = _INTS.get(ct)
                    if (v if v is not None else _bytes_int(ct)) & q[4] == q[5] or (
                            q[6] and _cur_stack_scalar(cstack, spi) is not None):
                        continue
                elif frames[q[1]].callsite == q[2]:
                    continue
                if k:
                    quick.insert(0, quick.pop(k))
                return False
        else:
            plan = None
        if len(old.refs) != len(cur.refs) or len(old.irqs) != len(cur.irqs):
            return False
        # func_states_equal: a state of more callback iterations begun (bpf_loop's
        # callback_depth) does not cover one of fewer
        ofs = old.frames
        for k in range(len(ofs)):
            if ofs[k].cb_depth > frames[k].cb_depth:
                return False
        idmap: dict[int, int] = {}
        # refsafe: the references and the lock held, their ids through the map
        if old.refs and not all(self._ids(o[0], c[0], idmap)
                                for o, c in zip(old.refs, cur.refs, strict=True)):
            return False
        if len(old.locks) != len(cur.locks) or old.locks and not all(
                o[:2] == c[:2] and self._ids(o[2], c[2], idmap)
                for o, c in zip(old.locks, cur.locks, strict=True)):
            return False
        # the IRQ references in order (active_irq_id is the last)
        if old.irqs and not all(self._ids(o[0], c[0], idmap)
                                for o, c in zip(old.irqs, cur.irqs, strict=True)):
            return False
        if old.rcu != cur.rcu or old.preempt != cur.preempt:
            return False
        if plan is not None:
            return self._equal_planned(plan, cur, idmap)
        for fi, (fo, fc) in enumerate(zip(old.frames, cur.frames, strict=True)):
            if fo.callsite != fc.callsite:
                return False
            last = fi == len(old.frames) - 1
            # registers live at the frame's pc: old's for the callee, its call for a caller
            flive = live if last else self.live[old.frames[fi + 1].callsite]
            for r in range(11):
                if not exact and not flive >> r & 1:
                    continue
                if not self._regsafe(fo.regs[r], fc.regs[r], idmap, exact):
                    return False
            if self.loose and not exact:
                # only the slots live at old's pc (a finished state's)
                slots = [(spi, fo.stack[spi]) for spi in _bits(self._alive(old)[fi])
                         if spi < len(fo.stack)]
            else:
                slots = list(enumerate(fo.stack))
            for spi, so in slots:
                sc = fc.slot(spi)
                if so == sc and so[1] is None:
                    continue
                if exact:
                    if so[0] != sc[0] or (so[1] is None) != (sc[1] is None) or (
                            so[1] is not None and sc[1] is not None
                            and not self._regsafe(so[1], sc[1], idmap, True)):
                        return False
                    continue
                if not self.loose and so[0] != sc[0]:
                    # RANGE_WITHIN (a loop's convergence): 6.18's stacksafe wants every
                    # byte's slot type alike, a misc or invalid byte of old's included
                    return False
                if self.loose and so[0] != sc[0]:
                    # scalar_reg_for_stack: all-MISC bytes are an unbounded scalar, which
                    # an imprecise spilled scalar accepts
                    ro, rc = _stack_scalar(so), _cur_stack_scalar(fc.stack, spi)
                    if ro is not None and rc is not None:
                        if not self._regsafe(ro, rc, idmap, False):
                            return False
                        continue
                for k in range(8):
                    a = so[0][k]
                    # allow_uninit_stack (root): a byte old held as misc matches anything
                    if a != S_INVALID and a != S_MISC and a != sc[0][k]:
                        return False
                if so[1] is not None and S_SPILL in so[0]:
                    if sc[1] is None or not self._regsafe(so[1], sc[1], idmap, False):
                        return False
                elif so[0][0] == S_ITER:  # the depth does not matter, the state does
                    io, ic = so[1], sc[1]
                    if io is None or ic is None or io.sub != ic.sub or io.bt != ic.bt or \
                            not self._ids(io.ref, ic.ref, idmap):
                        return False
                elif so[0][0] == S_IRQ and not self._irq_slot_safe(so, sc, idmap):
                    return False
            if exact and len(fc.stack) > len(fo.stack):
                if any(s != _EMPTY for s in fc.stack[len(fo.stack):]):
                    return False
        return True

    def _equal_planned(self, plan: list[_FramePlan], cur: State,
                       idmap: dict[int, int]) -> bool:
        """states_equal (NOT_EXACT, loop-free pc) along a plan, once its quick checks
        passed: the same checks in the same order as the general comparison below."""
        regsafe = self._regsafe
        for fi, (_, regs, slots) in enumerate(plan):
            fc = cur.frames[fi]
            cregs = fc.regs
            for r, o in regs:
                if not regsafe(o, cregs[r], idmap, False):
                    return False
            cstack = fc.stack
            n = len(cstack)
            for spi, so, mask, want in slots:
                sc = cstack[spi] if spi < n else _EMPTY
                if so is sc:  # shared since a common ancestor (Frame.copy): equal
                    x = so[1]
                    # unless ids must map one to one (check_ids has to see them)
                    if x is None or (x.t == SCALAR and not x.precise) or \
                            (not x.id and not x.ref):
                        continue
                elif so == sc and so[1] is None:
                    continue
                if so[0] != sc[0]:
                    ro, rc = _stack_scalar(so), _cur_stack_scalar(cstack, spi)
                    if ro is not None and rc is not None:
                        if not regsafe(ro, rc, idmap, False):
                            return False
                        continue
                ot, ct = so[0], sc[0]
                # every byte old relied on (not invalid, not misc: allow_uninit_stack)
                v = _INTS.get(ct)
                if (v if v is not None else _bytes_int(ct)) & mask != want:
                    return False
                ospill = so[1]
                if ospill is not None and S_SPILL in ot:
                    cspill = sc[1]
                    if cspill is None:
                        return False
                    if ospill.t == SCALAR and cspill.t == SCALAR and not ospill.precise:
                        continue  # (_regsafe, loose: any scalar will do)
                    if not regsafe(ospill, cspill, idmap, False):
                        return False
                elif ot[0] == S_ITER:
                    io, ic = so[1], sc[1]
                    if io is None or ic is None or io.sub != ic.sub or io.bt != ic.bt or \
                            not self._ids(io.ref, ic.ref, idmap):
                        return False
                elif ot[0] == S_IRQ and not self._irq_slot_safe(so, sc, idmap):
                    return False
        return True

    def _irq_slot_safe(self, so: Slot, sc: Slot, idmap: dict[int, int]) -> bool:
        """stacksafe for STACK_IRQ_FLAG: the saved states' ids map one to one."""
        io, ic = so[1], sc[1]
        return io is not None and ic is not None and io.sub == ic.sub and \
            self._ids(io.ref, ic.ref, idmap)

    @staticmethod
    def _ids(a: int, b: int, idmap: dict[int, int]) -> bool:
        """check_ids: old id ``a`` stands for cur id ``b``, one to one (``idmap`` holds
        old -> cur under the old id, cur -> old under the cur id negated)."""
        if not a or not b:
            return not a and not b
        got = idmap.get(a)
        if got is not None:
            return got == b
        if -b in idmap:
            return False
        idmap[a] = b
        idmap[-b] = a
        return True

    def _scalar_ids(self, a: int, b: int, idmap: dict[int, int]) -> bool:
        """check_scalar_ids: a scalar without an id gets a fresh one, which matches any
        id not yet matched to another."""
        if not a:
            self.tmp_id += 1
            a = self.tmp_id
        if not b:
            self.tmp_id += 1
            b = self.tmp_id
        return self._ids(a, b, idmap)

    def _regsafe(self, o: Reg, c: Reg, idmap: dict[int, int], exact: bool) -> bool:
        if exact:
            if o.t != c.t:
                return False
            ko, kc = o.key(), c.key()
            # ids compared through the map, the rest exactly
            return ko[4:] == kc[4:] and ko[:2] == kc[:2] and self._ids(o.id, c.id, idmap) \
                and self._ids(o.ref, c.ref, idmap)
        if o.t == NOT_INIT:  # RANGE_WITHIN: only an uninitialized one (6.18)
            return self.loose or c.t == NOT_INIT
        if c.t == NOT_INIT:
            return False
        if o.t == SCALAR:
            if c.t != SCALAR:
                return False
            if not o.precise and self.loose:
                return True
            # linked with an offset: the same kind of link and the same offset
            if o.id and (o.id ^ c.id) & BPF_ADD_CONST:
                return False
            if o.id & BPF_ADD_CONST and o.off != c.off:
                return False
            return self._within(o, c) and self._scalar_ids(o.id, c.id, idmap)
        if o.t != c.t or o.off != c.off:
            return False
        base = o.t & 0xFF
        if base in (PKT, PKT_META):
            if o.rng > c.rng or (o.rng < 0 and o.rng != c.rng):
                return False
        if base in (MAP_VALUE, MAP_PTR) and (o.map is not c.map):
            if o.map is None or c.map is None or o.map.name != c.map.name:
                return False
        if base == MEM and o.msize != c.msize:
            return False
        if base == STACK and o.frame != c.frame:
            return False
        if base == FUNC and o.sub != c.sub:
            return False
        if base == BTF_ID and (o.sub != c.sub or o.bt != c.bt):  # memcmp: btf, btf_id
            return False
        return self._within(o, c) and self._ids(o.id, c.id, idmap) and \
            self._ids(o.ref, c.ref, idmap)

    @staticmethod
    def _within(o: Reg, c: Reg) -> bool:
        """range_within and tnum_in: every value ``c`` may hold, ``o`` may too."""
        return (o.umin <= c.umin and o.umax >= c.umax and o.smin <= c.smin
                and o.smax >= c.smax and o.u32min <= c.u32min and o.u32max >= c.u32max
                and o.s32min <= c.s32min and o.s32max >= c.s32max
                and t_in((o.tv, o.tm), (c.tv, c.tm)))

    # -- registers ------------------------------------------------------------------------
    def _read(self, regs: list[Reg], r: int) -> Reg:
        reg = regs[r]
        if reg.t == NOT_INIT:
            raise Refuse(f"R{r} !read_ok")
        return reg

    def _dst(self, r: int) -> None:
        if r == 10:
            raise Refuse("frame pointer is read only")

    # -- ALU --------------------------------------------------------------------------------
    def _alu(self, regs: list[Reg], i: Instruction) -> None:
        o = i.code & 0xF0
        is64 = (i.code & 7) == op.BPF_ALU64
        x = bool(i.code & op.BPF_X)
        if o in (op.BPF_NEG, op.BPF_END):
            self._read(regs, i.dst)
            self._dst(i.dst)
            d = regs[i.dst]
            if d.t != SCALAR:  # root (allow_ptr_leaks): the pointer's bits, unknown
                d.set_unknown()
                return
            if o == op.BPF_NEG:
                zero = _known(0)
                src = d.copy()
                d.assign(zero)
                self._scalar_op(d, src, op.BPF_SUB, is64)
            else:
                self._byte_swap(d, i, is64)
            return
        if x:
            src = self._read(regs, i.src)
        else:
            src = _known_template(i.imm)  # sign-extended imm; only read below
        if o == op.BPF_MOV:
            self._dst(i.dst)
            self._mov(regs, i, src, is64, x)
            return
        d = self._read(regs, i.dst)
        if o in (op.BPF_DIV, op.BPF_MOD) and not x and i.imm == 0:
            raise Refuse("div by zero", errno.EINVAL)
        if o in (op.BPF_LSH, op.BPF_RSH, op.BPF_ARSH) and not x:
            size = 64 if is64 else 32
            if not 0 <= i.imm < size:
                raise Refuse(f"invalid shift {i.imm}", errno.EINVAL)
        self._dst(i.dst)
        if d.t != SCALAR or src.t != SCALAR:
            if x and (d.t == SCALAR) != (src.t == SCALAR) and self.state is not None:
                # pointer += scalar: the scalar's range becomes the pointer's bounds
                self._mark_precise(self.state, [i.dst if d.t == SCALAR else i.src])
            self._ptr_alu(regs, i, d, src, o, is64, x)
            return
        if o in (op.BPF_AND, op.BPF_OR) and src.tm == 0:
            self._fork_scalars(d, i.dst)
        self._scalar_op(d, src, o, is64)

    def _fork_scalars(self, d: Reg, dst: int) -> None:
        """maybe_fork_scalars: a scalar known to be -1 or 0 (what ``x s>> 63`` makes,
        or 31 of a subregister) masked with a constant is walked as each: the path goes
        on with -1, the instruction is walked again with 0."""
        if d.smin == -1 and d.smax == 0:
            alu32 = False
        elif d.s32min == -1 and d.s32max == 0:
            alu32 = True
        else:
            return
        st, stack = self.state, self.paths
        if st is None or stack is None:
            return
        q = st.copy()
        q.hist.pop()  # the instruction is walked again on that path
        for reg, v in ((q.cur.regs[dst], 0), (d, U64)):
            if alu32:
                reg.known32(v)
            else:
                reg.set_known(v)
        # (6.18.44's backport checks IS_ERR of a NULL push_stack here and oopses: mainline's
        # E2BIG stands in)
        self._push(q, self.pc, stack, errno.E2BIG)

    @staticmethod
    def _byte_swap(d: Reg, i: Instruction, is64: bool) -> None:
        """scalar_byte_swap: bswap (ALU64) and to_be (on this little-endian machine) swap
        the tnum's bytes, whose bounds then come from it; le16/le32 and the swaps of 16
        and 32 bits truncate. The result is not zero-extended further."""
        swap = is64 or bool(i.code & op.BPF_X)  # BPF_TO_BE shares BPF_X's bit
        if swap or i.imm in (16, 32):
            d.id = 0
        if swap:
            d.tv, d.tm = t_bswap((d.tv, d.tm), i.imm)
            d.smin, d.smax, d.umin, d.umax = S64_MIN, S64_MAX, 0, U64
            d.s32min, d.s32max, d.u32min, d.u32max = S32_MIN, S32_MAX, 0, U32
        if i.imm in (16, 32):
            d.coerce(i.imm // 8)
        d.sync()

    def _mov(self, regs: list[Reg], i: Instruction, src: Reg, is64: bool, x: bool) -> None:
        d = regs[i.dst]
        if not x:
            d.set_known(i.imm if is64 else i.imm & U32)
            return
        if i.off in (8, 16, 32) and (is64 or i.off != 32):
            if src.t != SCALAR:  # root (allow_ptr_leaks): an unknown scalar
                d.set_unknown()
                if not is64:
                    d.coerce(4)
                return
            # a value the extension leaves alone stays linked to its source
            no_sext = src.umax < 1 << (i.off - 1)
            if no_sext:
                self._id_before_mov(src)
            v = src.copy()
            if not no_sext:
                v.id = v.off = 0
            if is64:
                v.coerce_sx(i.off // 8)
            else:  # the subregister's bounds, then the zero-extension
                v.coerce_subreg_sx(i.off // 8)
                v.zext32()
                v.sync()
            d.assign(v)
            return
        if is64:
            self._id_before_mov(src)
            d.assign(src)
            return
        if src.t != SCALAR:
            d.set_unknown()
            d.coerce(4)
            return
        keep = src.umax <= U32
        if keep:
            self._id_before_mov(src)
        v = src.copy()
        if not keep:
            v.id = v.off = 0
        # zext_32_to_64: the subregister's own bounds become the register's (a 64-bit
        # truncation would lose what a JMP32 compare proved of the low half)
        v.zext32()
        v.sync()
        d.assign(v)

    def _id_before_mov(self, src: Reg) -> None:
        """assign_scalar_id_before_mov: a scalar copied (or spilled) whole shares an id
        with its copy, for a compare of one to bound the other; an offset link is not
        passed on (one ``rX += const`` per link)."""
        if src.t != SCALAR:
            return
        if src.id & BPF_ADD_CONST:
            src.id = 0
            src.off = 0
        if not src.id and src.tm != 0:
            src.id = self._new_id()

    def _scalar_op(self, d: Reg, s: Reg, o: int, is64: bool) -> None:
        """adjust_reg_min_max_vals on two scalars. ``rX += const`` (or ``-=``) keeps rX
        linked to its copies, the constant in ``off`` (BPF_ADD_CONST): a compare of one
        then bounds the other, shifted by the difference; any other operation ends the
        link."""
        did, dumax = d.id, d.umax
        src_const = s.tm == 0 if is64 else s.sub_const()
        val = s.tv if is64 else s.tv & U32  # before the operation: s may be d
        self._scalar_bounds(d, s, o, is64)
        if did and src_const and o in (op.BPF_ADD, op.BPF_SUB):
            off = _s32(val)
            if (is64 and _s64(val) != off) or (not is64 and dumax > U32) or \
                    (o == op.BPF_SUB and off == S32_MIN) or did & BPF_ADD_CONST:
                d.id = d.off = 0
            else:
                d.id = did | (BPF_ADD_CONST64 if is64 else BPF_ADD_CONST32)
                d.off = -off if o == op.BPF_SUB else off

    def _scalar_bounds(self, d: Reg, s: Reg, o: int, is64: bool) -> None:
        d.id = d.off = 0  # unlinked: an offset link's constant goes with its id
        bits = 64 if is64 else 32
        src_const = s.tm == 0 if is64 else s.sub_const()
        sval = s.tv if is64 else s.tv & U32
        # is_safe_to_compute_dst_reg_range: otherwise the whole register is unknown, not
        # zero-extended even for ALU32 (adjust_scalar_min_max_vals returns early)
        if o in (op.BPF_LSH, op.BPF_RSH, op.BPF_ARSH):
            if not (src_const and sval < bits):
                d.set_unknown()
                return
        elif o not in (op.BPF_ADD, op.BPF_SUB, op.BPF_AND, op.BPF_OR, op.BPF_XOR, op.BPF_MUL):
            d.set_unknown()
            return
        # the rest is a pure function of both tnums and bounds, met again and again
        key = (o, is64, *d.scalar(), *s.scalar())
        got = _SCALAR_OPS.get(key)
        if got is not None:
            d.set_scalar(got)
            return
        self._scalar_arith(d, s, o, is64, sval)
        _SCALAR_OPS.put(key, d.scalar())

    def _scalar_arith(self, d: Reg, s: Reg, o: int, is64: bool, sval: int) -> None:
        """The tnum and bounds of ``d`` after ``d o= s`` (both scalars, the operation one
        whose bounds are tracked)."""
        if is64:
            if o in (op.BPF_RSH, op.BPF_ARSH) or (o == op.BPF_LSH and sval >= 32):
                r32 = (S32_MIN, S32_MAX, 0, U32)  # rebuilt from the tnum
            else:
                r32 = self._op32(d, s, o)
            self._op64(d, s, o)
            d.s32min, d.s32max, d.u32min, d.u32max = r32
            d.sync()
        else:
            r32 = self._op32(d, s, o)
            t = self._tnum_op((d.tv & U32, d.tm & U32), (s.tv & U32, s.tm & U32), o, 32)
            d.tv, d.tm = t[0] & U32, t[1] & U32
            d.s32min, d.s32max, d.u32min, d.u32max = r32
            d.smin, d.smax, d.umin, d.umax = S64_MIN, S64_MAX, 0, U64
            d.sync()
            d.zext32()
            d.sync()

    @staticmethod
    def _tnum_op(a: Tnum, b: Tnum, o: int, bits: int) -> Tnum:
        m = (1 << bits) - 1
        if o == op.BPF_ADD:
            r = t_add(a, b)
        elif o == op.BPF_SUB:
            r = t_sub(a, b)
        elif o == op.BPF_MUL:
            r = t_mul(a, b)
        elif o == op.BPF_AND:
            r = t_and(a, b)
        elif o == op.BPF_OR:
            r = t_or(a, b)
        elif o == op.BPF_XOR:
            r = t_xor(a, b)
        elif o == op.BPF_LSH:
            r = t_lshift(a, b[0] & (bits - 1))
        elif o == op.BPF_RSH:
            r = t_rshift((a[0] & m, a[1] & m), b[0] & (bits - 1))
        else:
            r = t_arshift((a[0] & m, a[1] & m), b[0] & (bits - 1), bits)
        return (r[0] & m, r[1] & m)

    def _op64(self, d: Reg, s: Reg, o: int) -> None:
        t = self._tnum_op((d.tv, d.tm), (s.tv, s.tm), o, 64)
        smin, smax, umin, umax = d.smin, d.smax, d.umin, d.umax
        if o == op.BPF_ADD:
            a, b = smin + s.smin, smax + s.smax
            smin, smax = (a, b) if S64_MIN <= a and b <= S64_MAX else (S64_MIN, S64_MAX)
            umin, umax = _wrap_add(umin, umax, s.umin, s.umax, U64)
        elif o == op.BPF_SUB:
            a, b = smin - s.smax, smax - s.smin
            smin, smax = (a, b) if S64_MIN <= a and b <= S64_MAX else (S64_MIN, S64_MAX)
            umin, umax = _wrap_sub(umin, umax, s.umin, s.umax, U64)
        elif o == op.BPF_MUL:
            b = umax * s.umax
            umin, umax = (umin * s.umin, b) if b <= U64 else (0, U64)
            ps = [smin * s.smin, smin * s.smax, smax * s.smin, smax * s.smax]
            smin, smax = (min(ps), max(ps)) if min(ps) >= S64_MIN and max(ps) <= S64_MAX \
                else (S64_MIN, S64_MAX)
        elif o == op.BPF_AND:
            umin, umax = t[0], min(umax, s.umax)
            smin, smax = (_s64(umin), _s64(umax)) if _s64(umin) <= _s64(umax) \
                else (S64_MIN, S64_MAX)
        elif o == op.BPF_OR:
            umin, umax = max(umin, s.umin), t[0] | t[1]
            smin, smax = (_s64(umin), _s64(umax)) if _s64(umin) <= _s64(umax) \
                else (S64_MIN, S64_MAX)
        elif o == op.BPF_XOR:
            umin, umax = t[0], t[0] | t[1]
            smin, smax = (_s64(umin), _s64(umax)) if _s64(umin) <= _s64(umax) \
                else (S64_MIN, S64_MAX)
        elif o == op.BPF_LSH:
            sh = s.tv
            # <<32 then s>>32 sign-extends a subregister: keep non-negative 32-bit bounds
            smax = d.s32max << 32 if sh == 32 and d.s32max >= 0 else S64_MAX
            smin = d.s32min << 32 if sh == 32 and d.s32min >= 0 else S64_MIN
            if umax > (1 << (63 - sh)):
                umin, umax = 0, U64
            else:
                umin, umax = umin << sh, umax << sh
        elif o == op.BPF_RSH:
            sh = s.tv
            umin, umax = umin >> sh, umax >> sh
            smin, smax = S64_MIN, S64_MAX
        else:  # ARSH
            sh = s.tv
            smin, smax = smin >> sh, smax >> sh
            umin, umax = 0, U64
        d.tv, d.tm = t
        d.smin, d.smax, d.umin, d.umax = smin, smax, umin, umax

    @staticmethod
    def _op32(d: Reg, s: Reg, o: int) -> tuple[int, int, int, int]:
        smin, smax, umin, umax = d.s32min, d.s32max, d.u32min, d.u32max
        t = _Verifier._tnum_op((d.tv & U32, d.tm & U32), (s.tv & U32, s.tm & U32), o, 32)
        if o == op.BPF_ADD:
            a, b = smin + s.s32min, smax + s.s32max
            smin, smax = (a, b) if S32_MIN <= a and b <= S32_MAX else (S32_MIN, S32_MAX)
            umin, umax = _wrap_add(umin, umax, s.u32min, s.u32max, U32)
        elif o == op.BPF_SUB:
            a, b = smin - s.s32max, smax - s.s32min
            smin, smax = (a, b) if S32_MIN <= a and b <= S32_MAX else (S32_MIN, S32_MAX)
            umin, umax = _wrap_sub(umin, umax, s.u32min, s.u32max, U32)
        elif o == op.BPF_MUL:
            b = umax * s.u32max
            umin, umax = (umin * s.u32min, b) if b <= U32 else (0, U32)
            ps = [smin * s.s32min, smin * s.s32max, smax * s.s32min, smax * s.s32max]
            smin, smax = (min(ps), max(ps)) if min(ps) >= S32_MIN and max(ps) <= S32_MAX \
                else (S32_MIN, S32_MAX)
        elif o == op.BPF_AND:
            umin, umax = t[0], min(umax, s.u32max)
            smin, smax = (_s32(umin), _s32(umax)) if _s32(umin) <= _s32(umax) \
                else (S32_MIN, S32_MAX)
        elif o == op.BPF_OR:
            umin, umax = max(umin, s.u32min), t[0] | t[1]
            smin, smax = (_s32(umin), _s32(umax)) if _s32(umin) <= _s32(umax) \
                else (S32_MIN, S32_MAX)
        elif o == op.BPF_XOR:
            umin, umax = t[0], t[0] | t[1]
            smin, smax = (_s32(umin), _s32(umax)) if _s32(umin) <= _s32(umax) \
                else (S32_MIN, S32_MAX)
        elif o == op.BPF_LSH:
            sh = s.tv & 31
            if umax > (1 << (31 - sh)):
                umin, umax = 0, U32
            else:
                umin, umax = umin << sh, umax << sh
            smin, smax = S32_MIN, S32_MAX
        elif o == op.BPF_RSH:
            sh = s.tv & 31
            umin, umax = umin >> sh, umax >> sh
            smin, smax = S32_MIN, S32_MAX
        else:
            sh = s.tv & 31
            smin, smax = smin >> sh, smax >> sh
            umin, umax = 0, U32
        return smin, smax, umin, umax

    # -- pointer arithmetic (adjust_ptr_min_max_vals) ------------------------------------------
    def _ptr_alu(self, regs: list[Reg], i: Instruction, d: Reg, s: Reg, o: int, is64: bool,
                 x: bool) -> None:
        dst = i.dst
        if d.t != SCALAR and s.t != SCALAR:
            if o == op.BPF_SUB:
                d.set_unknown()
                return
            raise Refuse(f"R{dst} pointer {_ALU_NAMES[o]} pointer prohibited")
        if d.t != SCALAR:
            ptr, off = d, s
        else:
            ptr, off = s, d
        if not is64:
            if o == op.BPF_SUB:  # root (allow_ptr_leaks): a meaningless scalar
                d.set_unknown()
                return
            raise Refuse(f"R{dst} 32-bit pointer arithmetic prohibited")
        if ptr.t & MAYBE_NULL:
            raise Refuse(f"R{dst} pointer arithmetic on {type_str(ptr.t)} prohibited, "
                         "null-check it first")
        if ptr.t & 0xFF == MEM and ptr.t & UNTRUSTED:
            # untrusted memory is read by probe loads: its offset is not tracked
            d.assign(ptr)
            return
        base = ptr.t & 0xFF
        known = off.tm == 0
        if base in (PKT_END, SOCK, SOCK_COMMON) or (base == MAP_PTR and not (known and off.smin == 0
                                                             and o == op.BPF_ADD)):
            raise Refuse(f"R{dst} pointer arithmetic on {type_str(ptr.t)} prohibited")
        # the operands' offsets are checked before the operator (a bitwise or other
        # operator on a pointer with an unbounded scalar fails for the scalar)
        self._sane_offset(off, ptr.t)
        self._sane_offset(ptr, ptr.t)
        if o in (op.BPF_AND, op.BPF_OR, op.BPF_XOR):
            raise Refuse(f"R{dst} bitwise operator {_ALU_NAMES[o]} on pointer prohibited")
        if o not in (op.BPF_ADD, op.BPF_SUB):
            raise Refuse(f"R{dst} pointer arithmetic with {_ALU_NAMES[o]} operator "
                         "prohibited")
        res = ptr.copy()
        if o == op.BPF_ADD:
            if known and -(1 << 31) <= ptr.off + off.smin < (1 << 31):
                res.off = ptr.off + off.smin
            else:
                a, b = ptr.smin + off.smin, ptr.smax + off.smax
                res.smin, res.smax = (a, b) if S64_MIN <= a and b <= S64_MAX \
                    else (S64_MIN, S64_MAX)
                a, b = ptr.umin + off.umin, ptr.umax + off.umax
                res.umin, res.umax = (a, b) if b <= U64 else (0, U64)
                res.tv, res.tm = t_add((ptr.tv, ptr.tm), (off.tv, off.tm))
                res.s32min, res.s32max, res.u32min, res.u32max = S32_MIN, S32_MAX, 0, U32
                if res.is_pkt():
                    res.id = self._new_id()
                    res.rng = 0
        else:
            if off is d:
                raise Refuse(f"R{dst} tried to subtract pointer from scalar")
            if base == STACK:
                raise Refuse(f"R{dst} subtraction from stack pointer prohibited")
            if known and -(1 << 31) <= ptr.off - off.smin < (1 << 31):
                res.off = ptr.off - off.smin
            else:
                a, b = ptr.smin - off.smax, ptr.smax - off.smin
                res.smin, res.smax = (a, b) if S64_MIN <= a and b <= S64_MAX \
                    else (S64_MIN, S64_MAX)
                res.umin, res.umax = (ptr.umin - off.umax, ptr.umax - off.umin) \
                    if ptr.umin >= off.umax else (0, U64)
                res.tv, res.tm = t_sub((ptr.tv, ptr.tm), (off.tv, off.tm))
                res.s32min, res.s32max, res.u32min, res.u32max = S32_MIN, S32_MAX, 0, U32
                if res.is_pkt():
                    res.id = self._new_id()
                    if off.smin < 0:
                        res.rng = 0
        if res.is_pkt() and res.rng < 0:
            # Linux 6.18 (measured): arithmetic forgets that a pointer was at or beyond
            # data_end; its accesses then fail as out of range (-EACCES), not -EINVAL
            res.rng = 0
        self._sane_offset(res, ptr.t)
        res.sync()
        d.assign(res)

    @staticmethod
    def _sane_offset(r: Reg, t: int) -> None:
        """check_reg_sane_offset; adjust_ptr_min_max_vals refuses a failure with -EINVAL."""
        ts = type_str(t)
        if r.t != SCALAR:
            # a pointer (the operand or the result): its fixed and variable offsets
            # (measured on 6.18: both are refused in these words)
            if r.off >= BPF_MAX_VAR_OFF or r.off <= -BPF_MAX_VAR_OFF:
                raise Refuse(f"{ts} pointer offset {r.off} is not allowed", errno.EINVAL)
            if r.smin >= BPF_MAX_VAR_OFF or r.smin <= -BPF_MAX_VAR_OFF:
                raise Refuse(f"{ts} pointer offset {r.smin} is not allowed", errno.EINVAL)
            return
        # the scalar: its off is its link's constant (BPF_ADD_CONST), which its bounds
        # already hold
        val = _s64(r.tv)
        if r.tm == 0 and (val >= BPF_MAX_VAR_OFF or val <= -BPF_MAX_VAR_OFF):
            raise Refuse(f"math between {ts} pointer and {val} is not allowed", errno.EINVAL)
        if r.smin == S64_MIN:
            raise Refuse(f"math between {ts} pointer and register with unbounded min value "
                         "is not allowed", errno.EINVAL)
        if r.smin >= BPF_MAX_VAR_OFF or r.smin <= -BPF_MAX_VAR_OFF:
            raise Refuse(f"value {r.smin} makes {ts} pointer be out of bounds", errno.EINVAL)

    # -- ld_imm64 ---------------------------------------------------------------------------
    def _ld(self, st: State, i: Instruction, pc: int) -> None:
        if i.code != op.OP_LD_IMM64:
            raise Refuse("BPF_LD_[ABS|IND] instructions not allowed for this program type",
                         errno.EINVAL)
        self._dst(i.dst)
        d = st.frames[-1].regs[i.dst]
        ref = self.map_at.get(pc)
        if ref is not None:
            m = self.maps.get(ref.map_name)
            if m is None:
                raise Refuse(f"fd {0} is not pointing to valid bpf_map", errno.EBADF)
            if ref.kind == "fd":
                d.set_ptr(MAP_PTR)
            else:
                d.set_ptr(MAP_VALUE, ref.offset)
            d.map = m
            return
        if i.src == op.PseudoSrc.BPF_PSEUDO_FUNC:
            if not self.spec.func_info:  # a callback's prototype comes from BTF
                raise Refuse("missing btf func_info", errno.EINVAL)
            if self._global_func(pc + 1 + i.imm):  # check_ld_imm: static functions only
                raise Refuse("callback function not static", errno.EINVAL)
            d.set_ptr(FUNC)
            d.sub = pc + 1 + i.imm
            return
        if i.src == op.PseudoSrc.BPF_PSEUDO_BTF_ID and not self.insns[pc + 1].imm:
            d.assign(_ksym_reg(core_target(self.core_btf), i.imm & U32))
            return
        if i.src != op.PseudoSrc.BPF_PSEUDO_NONE:
            raise Refuse("unrecognized bpf_ld_imm64 insn", errno.EINVAL)
        d.set_known(imm64_at(self.insns, pc))

    def _global_func(self, start: int) -> bool:
        """Whether the function at ``start`` is global (BTF_FUNC_GLOBAL linkage), called
        or not."""
        if start in self.globals:
            return True
        for fi in self.spec.func_info:
            if fi.insn_off == start and self.btf is not None:
                t = self.btf.type_by_id(fi.type_id)
                return t.kind is BtfKind.FUNC and t.linkage == BTF_FUNC_GLOBAL
        return False

    # -- memory -----------------------------------------------------------------------------
    def _ldx(self, st: State, i: Instruction, acquire: bool = False) -> None:
        """check_load_mem; ``acquire``: a load-acquire's (check_atomic_load), whose
        alignment is strict and whose pointer kind is one."""
        regs = st.frames[-1].regs
        base = self._read(regs, i.src)
        if acquire and not _atomic_ptr_type_ok(base):
            raise Refuse(f"BPF_ATOMIC loads from R{i.src} {type_str(base.t)} is not allowed")
        self._dst(i.dst)
        size = _SIZES[i.code & 0x18]
        sx = i.code & 0xE0 == op.BPF_MEMSX
        if acquire and size > 1:
            self._check_alignment(base, i.off, size)
        base_t = base.t
        val = self._mem(st, i.src, base, i.off, size, write=False, value=None, sx=sx)
        self._save_aux_ptr_type(base_t, not acquire)
        if val is None:
            val = _UNKNOWN_SCALAR.copy()
        if val.t == SCALAR and size < 8:
            if sx:
                if val.umax >> (8 * size - 1):  # (measured) extending a sign bit unlinks
                    val.id = val.off = 0
                val.coerce_sx(size)
            else:
                val.coerce(size)
        regs[i.dst].assign(val)

    def _store(self, st: State, i: Instruction) -> None:
        regs = st.frames[-1].regs
        mode = i.code & 0xE0
        size = _SIZES[i.code & 0x18]
        release = op.is_atomic_store(i.code, i.imm)
        if (i.code & 7) == op.BPF_STX and mode == op.BPF_ATOMIC and not release:
            if i.imm == op.BPF_LOAD_ACQ:
                self._ldx(st, i, acquire=True)
            else:
                self._atomic(st, i, size)
            return
        value: Reg | None = None
        if (i.code & 7) == op.BPF_STX:
            value = self._read(regs, i.src)
        base = self._read(regs, i.dst)
        if release and size > 1:  # check_atomic_store: check_store_reg, strict alignment
            self._check_alignment(base, i.off, size)
        base_t = base.t
        if value is None:
            imm = _known(i.imm)
            self._mem(st, i.dst, base, i.off, size, write=True, value=None, imm=imm)
        else:
            self._mem(st, i.dst, base, i.off, size, write=True, value=value)
        self._save_aux_ptr_type(base_t, False)
        if release and not _atomic_ptr_type_ok(base):  # checked after the store's checks
            raise Refuse(f"BPF_ATOMIC stores into R{i.dst} {type_str(base.t)} is not allowed")

    def _save_aux_ptr_type(self, t: int, allow_trust_mismatch: bool) -> None:
        """save_aux_ptr_type: one load or store instruction, one kind of pointer where
        that kind is rewritten per type (context, sockets, kernel structs); a load may
        meet kernel objects and kernel memory, trusted or not (then taken as the least
        trusted of them)."""
        prev = self.aux_ptr.get(self.pc)
        if prev is None:
            self.aux_ptr[self.pc] = t
            return
        if t == prev or (t & 0xFF not in _REWRITTEN_PTRS and prev & 0xFF not in _REWRITTEN_PTRS):
            return
        if allow_trust_mismatch and t & 0xFF in (MEM, BTF_ID) and prev & 0xFF in (MEM, BTF_ID):
            # kernel memory and kernel objects, trusted or not: the load is one of
            # untrusted memory if either is (a probe load), read-only if either is
            merged = MEM if MEM in (t & 0xFF, prev & 0xFF) else BTF_ID
            self.aux_ptr[self.pc] = merged | (t | prev) & (UNTRUSTED | RDONLY)
            return
        raise Refuse("same insn cannot be used with different pointers", errno.EINVAL)

    def _atomic(self, st: State, i: Instruction, size: int) -> None:
        misfit = _atomic_misfit(i)
        if misfit is not None:
            raise Refuse(misfit, errno.EINVAL)
        regs = st.cur.regs
        self._read(regs, i.src)
        self._read(regs, i.dst)
        if i.imm == op.BPF_CMPXCHG:
            self._read(regs, 0)
        base = regs[i.dst]
        if not _atomic_ptr_type_ok(base):
            raise Refuse(f"BPF_ATOMIC stores into R{i.dst} {type_str(base.t)} is not allowed")
        desc = {MAP_VALUE: "value ", MAP_KEY: "key ", CTX: "context ", STACK: "stack "}.get(
            base.t & 0xFF)
        if desc is not None and (base.tv + base.off + i.off) % size:  # strict for atomics
            raise Refuse(f"misaligned {desc}access off {_tn(base)}+{base.off}+{i.off} "
                         f"size {size}")
        base_t = base.t
        if base_t == STACK and not base.const:
            # check_stack_read: the first read goes to no register, which a variable
            # offset may not do (after the bounds checks)
            off = i.off + base.off
            self._stack_var(st, st.frames[base.frame], i.dst, base, off, size, False)
            raise Refuse("variable offset stack pointer cannot be passed into helper "
                         f"function; var_off={_tn(base)} off={off} size={size}")
        old = self._mem(st, i.dst, base, i.off, size, write=False, value=None)
        self._save_aux_ptr_type(base_t, False)
        self._mem(st, i.dst, base, i.off, size, write=True, value=None)
        if i.imm == op.BPF_CMPXCHG or i.imm & op.BPF_FETCH:
            # the old value is loaded as by a load of that size (a stack slot's spill
            # is filled)
            r = _UNKNOWN_SCALAR.copy() if old is None else old.copy()
            if r.t == SCALAR and size < 8:
                r.coerce(size)
            regs[0 if i.imm == op.BPF_CMPXCHG else i.src].assign(r)

    def _mem(self, st: State, regno: int, reg: Reg, off: int, size: int, *, write: bool,
             value: Reg | None, imm: Reg | None = None, sx: bool = False) -> Reg | None:
        """check_mem_access: the loaded value for reads (None: an unknown scalar); ``sx``
        for a sign-extending load."""
        # complete (see facts.py); noting the same access again would change nothing
        noted = (self.pc, reg.t, id(reg.map))
        if noted not in self.noted:
            self.noted[noted] = reg.map  # (kept alive: its id stays its own)
            self.facts.note(self.pc, type_str(reg.t), reg.map)
        t = reg.t
        full = off + reg.off
        if self.strict_align and size > 1 and t != STACK:
            self._check_alignment(reg, off, size)
        if t == MAP_VALUE:
            m = reg.map
            assert m is not None
            if write and _rdonly(m):
                raise Refuse(f"write into map forbidden, value_size={m.value_size} "
                             f"off={full} size={size}")
            if not write and m.flags & BPF_F_WRONLY_PROG:
                raise Refuse(f"read from map forbidden, value_size={m.value_size} "
                             f"off={full} size={size}")
            self._region(regno, reg, full, size, m.value_size, "map value")
            kptr = self._field_overlap(m, reg, full, size, direct=True)
            if kptr is not None:
                return self._kptr_access(reg, kptr, write, value, imm)
            if not write and reg.tm == 0 and _rdonly(m) and size in (1, 2, 4, 8):
                raw = self._map_bytes(m)
                pos = full + reg.tv
                if raw is not None and 0 <= pos and pos + size <= len(raw):
                    r = _known(int.from_bytes(raw[pos:pos + size], "little"))
                    return r
            return None
        if t == MAP_KEY:
            if write:
                raise Refuse(f"write to change key R{regno} not allowed")
            assert reg.map is not None
            self._region(regno, reg, full, size, reg.map.key_size, "map key")
            return None
        if t & 0xFF == MEM and not t & MAYBE_NULL:
            if write and t & RDONLY:
                raise Refuse(f"R{regno} cannot write into {type_str(t)}")
            if not (t & RDONLY and t & UNTRUSTED):  # probe loads: no bounds to check
                self._region(regno, reg, full, size, reg.msize, "memory")
            return None
        if t == CTX:
            return self._ctx(regno, reg, full, size, write, sx)
        if t == STACK:
            return self._stack(st, regno, reg, full, size, write, value, imm)
        if t in (PKT, PKT_META):
            self._pkt(regno, reg, full, size)
            return None
        if t in (SOCK, SOCK_COMMON):
            if write:
                raise Refuse(f"R{regno} cannot write into {type_str(t)}")
            self._sock_access(regno, reg, full, size)
            return None
        if t & 0xFF == BTF_ID and not t & MAYBE_NULL:
            return self._btf_access(regno, reg, full, size, write)
        if t == MAP_PTR:
            return self._map_ptr_access(regno, reg, full, size, write)
        raise Refuse(f"R{regno} invalid mem access '{type_str(t)}'")

    def _untagged_kfunc(self, name: str) -> bool:
        """A kernel function called by name (as libbpf resolves it) that its kernel's
        BTF does not tag as a kfunc: a helper's body or any other function."""
        kernel = self._kernel_btf()
        func_id = kernel.find(name, BtfKind.FUNC)
        return func_id is not None and _not_kfunc(kernel, func_id)

    def _kernel_btf(self) -> BtfIndex:
        """The kernel's BTF as the program's kfuncs see it (CO-RE's target)."""
        return core_target(self.core_btf)

    def _btf_type(self, reg: Reg) -> int | None:
        """The kernel BTF id of the struct a PTR_TO_BTF_ID points to (None: this BTF
        has no such struct)."""
        if reg.sub:
            return reg.sub
        kbtf = self._kernel_btf()
        return kbtf.find(reg.bt, BtfKind.STRUCT) or kbtf.find(reg.bt, BtfKind.UNION)

    def _btf_access(self, regno: int, reg: Reg, off: int, size: int, write: bool
                    ) -> Reg | None:
        """check_ptr_to_btf_access: a read walks the struct's BTF (btf_struct_access); the
        value is a scalar (None), a PTR_TO_BTF_ID of a member's struct or read-only
        untrusted memory. XDP writes nothing but nf_conn fields (not modelled: refused)."""
        if reg.t & ALLOC and not reg.t & PERCPU:
            return self._obj_access(regno, reg, off, size, write)
        if not self.gpl and not reg.t & (ALLOC | PERCPU):
            raise Refuse(f"Cannot access kernel 'struct {reg.bt}' from non-GPL compatible "
                         "program", errno.EINVAL)
        if off < 0:
            raise Refuse(f"R{regno} is ptr_{reg.bt} invalid negative access: off={off}")
        if reg.tm or reg.tv:
            raise Refuse(f"R{regno} is ptr_{reg.bt} invalid variable offset: off={off}, "
                         f"var_off={tnum_str((reg.tv, reg.tm))}")
        if reg.t & PERCPU:  # only bpf_this_cpu_ptr/bpf_per_cpu_ptr reach a per-CPU object
            raise Refuse(f"R{regno} is ptr_{reg.bt} access percpu memory: off={off}")
        if write:
            raise Refuse("only read is supported")
        tid = self._btf_type(reg)
        if tid is None:  # a struct the BTF at hand lacks (a module's): its reads are scalars
            return None
        return self._btf_read(reg, tid, off, size)

    def _map_ptr_access(self, regno: int, reg: Reg, off: int, size: int, write: bool
                        ) -> Reg | None:
        """check_ptr_to_map_access: root reads the map's kernel struct (its ops'
        map_btf_id) as a PTR_TO_BTF_ID of it."""
        m = reg.map
        assert m is not None
        name = _MAP_STRUCTS.get(m.type, "")
        tid = self._kernel_btf().find(name, BtfKind.STRUCT) if name else None
        if not tid:
            raise Refuse(f"map_ptr access not supported for map type {m.type}", ENOTSUPP)
        if off < 0:
            raise Refuse(f"R{regno} is {name} invalid negative access: off={off}")
        if write:
            raise Refuse(f"only read from {name} is supported")
        as_btf = Reg()
        as_btf.set_ptr(BTF_ID)
        as_btf.bt, as_btf.sub = name, tid
        return self._btf_read(as_btf, tid, off, size)

    def _btf_read(self, reg: Reg, tid: int, off: int, size: int) -> Reg | None:
        """btf_struct_access of a read and mark_btf_ld_reg of its value."""
        try:
            got = struct_access(self._kernel_btf(), tid, off, size)
        except StructWalkError as e:
            raise Refuse(e.msg, e.err) from None
        if got.kind == "scalar":
            return None
        if got.kind == "fwd":
            raise UnsupportedHelper(
                f"{self.spec.name}: pc {self.pc} reads a struct {got.name} pointer, a struct "
                f"the kernel BTF at hand ({self._kernel_btf().path}) only declares: its "
                "layout, and Linux's verdict, are unknown here", pc=self.pc)
        r = Reg()
        if got.kind == "mem":  # mark_btf_ld_reg: PTR_TO_MEM | MEM_RDONLY | PTR_UNTRUSTED
            r.set_ptr(MEM | RDONLY | UNTRUSTED)
            return r
        # pointers walked from a trusted one are not trusted, but for the members of
        # RCU_FIELDS read from a trusted or RCU one (type_is_rcu: MEM_RCU, an XDP program
        # being in an RCU read section throughout); from an untrusted one untrusted
        untrusted = reg.t & UNTRUSTED or got.untrusted
        rcu = not untrusted and not reg.t & MAYBE_NULL and size == 8 and \
            (_is_trusted_reg(reg) or _is_rcu_reg(reg)) and self._rcu_field(reg, tid, off)
        r.set_ptr(BTF_ID | (UNTRUSTED if untrusted else RCU if rcu else 0))
        r.bt, r.sub = got.name, got.type_id
        return r

    def _begins_with(self, reg: Reg, struct: str) -> bool:
        """Whether the register's struct's first member (at offset 0, and its first
        member's, and so on) is struct ``struct``."""
        tid = self._btf_type(reg)
        kbtf = self._kernel_btf()
        for _ in range(8):
            t = kbtf.type_by_id(tid) if tid else None
            if t is None or t.kind is not BtfKind.STRUCT or not t.members or \
                    t.members[0].bit_offset:
                return False
            tid = t.members[0].type
            while kbtf.type_by_id(tid).kind in (BtfKind.TYPEDEF, BtfKind.CONST,
                                                BtfKind.VOLATILE, BtfKind.RESTRICT):
                tid = kbtf.type_by_id(tid).size_type
            m = kbtf.type_by_id(tid)
            if m.kind is BtfKind.STRUCT and m.name == struct:
                return True
        return False

    def _rcu_field(self, reg: Reg, tid: int, off: int) -> bool:
        """type_is_rcu: whether the member at ``off`` of the register's struct is one of
        its RCU_FIELDS."""
        names = RCU_FIELDS.get(reg.bt)
        if not names:
            return False
        kbtf = self._kernel_btf()
        return any(member_offset(kbtf, tid, m) == (off, 8) for m in names)

    def _obj_access(self, regno: int, reg: Reg, off: int, size: int, write: bool
                    ) -> Reg | None:
        """check_ptr_to_btf_access of a program-allocated object: reads and writes of its
        struct's members (btf_struct_access over the program's BTF)."""
        if off < 0:
            raise Refuse(f"R{regno} is ptr_{reg.bt} invalid negative access: off={off}")
        if reg.tm or reg.tv:
            raise Refuse(f"R{regno} is ptr_{reg.bt} invalid variable offset: off={off}, "
                         f"var_off={tnum_str((reg.tv, reg.tm))}")
        assert self.btf is not None
        for name, at in self._obj_fields(reg.sub):  # btf_struct_access: the record's fields
            if off < at + SPECIAL_FIELDS[name].size and at < off + size:
                # btf_field_type_name: both BPF_KPTR_UNREF and BPF_KPTR_REF are "kptr"
                raise Refuse(f"direct access to {_FIELD_NAMES.get(name, name)} is "
                             "disallowed")
        try:
            got = struct_access(self.btf, reg.sub, off, size)
        except StructWalkError as e:
            raise Refuse(e.msg, e.err) from None
        if got.kind != "scalar" and not write:
            raise UnsupportedHelper(f"{self.spec.name}: pc {self.pc} reads a pointer member of "
                                    f"struct {reg.bt}: not modelled by pyxdp", pc=self.pc)
        return None

    def _kptr_access(self, reg: Reg, at: int, write: bool, value: Reg | None,
                     imm: Reg | None) -> Reg | None:
        """check_map_kptr_access: the __kptr field at ``at`` (touched whole, as
        :meth:`_field_overlap` checked). A plain load of a referenced one is an RCU
        pointer to its object, or NULL, and nothing stores to it; a load of an
        unreferenced one (``__kptr_untrusted``) is an untrusted pointer, or NULL, and a
        store to it is of NULL or of a pointer to its struct (``value`` stored, ``imm``
        the immediate of a BPF_ST)."""
        i = self.insns[self.pc]
        if i.code & 0xE0 != op.BPF_MEM:
            raise Refuse("kptr in map can only be accessed using BPF_MEM instruction mode")
        assert reg.map is not None
        unref = self._unref_kptrs(reg.map).get(at)
        if write and unref is None:
            raise Refuse("store to referenced kptr disallowed")
        if unref is not None:
            name = self._unref_struct(unref)
            if write and i.code & 7 == op.BPF_ST:
                if imm is None or not imm.is_null():
                    raise Refuse(f"BPF_ST imm must be 0 when storing to kptr at off={at}")
                return None
            if write:
                assert value is not None
                if not value.is_null():
                    self._unref_match(i.src, value, name)
                return None
            # btf_ld_kptr_type: an unreferenced kptr is never RCU-safe
            r = Reg()
            r.set_ptr(BTF_ID | UNTRUSTED | MAYBE_NULL)
            r.bt, r.sub = name, self._kernel_btf().find(name, BtfKind.STRUCT) or 0
            r.id = self._new_id()
            return r
        if self.syscall:  # sleepable: outside an RCU section the load is untrusted
            raise UnsupportedHelper(f"{self.spec.name}: a plain load of a __kptr field in a "
                                    "syscall program is not modelled by pyxdp", pc=self.pc)
        tid = self._kptrs(reg.map)[at]
        r = Reg()
        r.id = self._new_id()
        if self._kernel_kptr(tid):
            # btf_ld_kptr_type: a kernel object pyxdp holds no such of (the field stays
            # NULL: bpf_kptr_xchg of one is not modelled) is an RCU pointer when its
            # struct is one of rcu_protected_types, else an untrusted one
            name = self.btf.types[tid].name if self.btf is not None else ""
            r.set_ptr(BTF_ID | (RCU if name in RCU_PROTECTED_TYPES else UNTRUSTED) |
                      MAYBE_NULL)
            r.bt, r.sub = name, self._kernel_btf().find(name, BtfKind.STRUCT) or 0
            return r
        name = self._kptr_struct(tid)
        # btf_ld_kptr_type (an XDP program is in an RCU read section): a per-CPU object's
        # pointer is no object's (MEM_PERCPU, not MEM_ALLOC), nor is a kernel object's
        # (its struct one of rcu_protected_types)
        kind = PERCPU if at in self._percpu_kptrs(reg.map) else \
            0 if name in KERNEL_KPTRS else ALLOC
        r.set_ptr(BTF_ID | kind | RCU | MAYBE_NULL)
        # a kernel object's struct by its name, as a kfunc's result names it (sub 0)
        r.bt, r.sub = name, 0 if name in KERNEL_KPTRS else tid
        return r

    def _unref_struct(self, tid: int) -> str:
        """An unreferenced kptr's struct, a kernel one (one only the program's BTF
        holds is not modelled)."""
        assert self.btf is not None
        name = self.btf.types[tid].name
        if not self._kernel_btf().find(name, BtfKind.STRUCT):
            raise UnsupportedHelper(f"{self.spec.name}: a __kptr_untrusted to program "
                                    f"struct {name} is not modelled by pyxdp", pc=self.pc)
        return name

    def _unref_match(self, n: int, reg: Reg, name: str) -> None:
        """map_kptr_match_type for an unreferenced kptr field of kernel struct ``name``:
        a kernel object's pointer (trusted, RCU, untrusted or maybe NULL) at no variable
        offset whose struct is, or holds at its offset, ``name``."""
        bad = f"invalid kptr access, R{n} type={type_str(reg.t)}"
        expected = f" expected=ptr_{name} or untrusted_ptr_{name}"
        if reg.t & 0xFF != BTF_ID:
            raise Refuse(bad + expected)
        program = reg.t & (ALLOC | PERCPU)  # an object of the program's BTF
        perm = (MAYBE_NULL | ALLOC) if program else (MAYBE_NULL | TRUSTED | RCU | UNTRUSTED)
        if reg.t & ~0xFF & ~perm or reg.t & PERCPU:
            raise Refuse(bad + expected)
        ts = type_str(reg.t)  # __check_ptr_off_reg, a fixed offset allowed
        if reg.off < 0:
            raise Refuse(f"negative offset {ts} ptr R{n} off={reg.off} disallowed")
        if not reg.const or reg.tv:
            raise Refuse(f"variable {ts} access var_off={_tn(reg)} disallowed")
        if program or not self._struct_at(self._btf_type(reg), reg.off, name):
            raise Refuse(bad + reg.bt + expected)

    def _struct_at(self, tid: int | None, off: int, name: str) -> bool:
        """btf_struct_ids_match (not strict): whether kernel struct ``tid`` is struct
        ``name`` (``off`` 0) or holds one at ``off`` (a nested struct member, or that
        member's first members)."""
        kbtf = self._kernel_btf()
        for _ in range(32):
            while tid and kbtf.type_by_id(tid).kind in (BtfKind.TYPEDEF, BtfKind.CONST,
                                                        BtfKind.VOLATILE, BtfKind.RESTRICT,
                                                        BtfKind.TYPE_TAG):
                tid = kbtf.type_by_id(tid).size_type
            t = kbtf.type_by_id(tid) if tid else None
            if t is None or t.kind is not BtfKind.STRUCT:
                return False
            if not off and t.name == name:
                return True
            # the member holding ``off`` (past the last one's end, descending finds no
            # struct at offset 0 again: each step keeps ``off`` past the member's size)
            held = [mem for mem in t.members if mem.bit_offset // 8 <= off]
            if not held or held[-1].bit_offset % 8:
                return False
            tid, off = held[-1].type, off - held[-1].bit_offset // 8
        return False

    @staticmethod
    def _sock_access(regno: int, reg: Reg, off: int, size: int) -> None:
        """check_sock_access: bpf_sock_is_valid_access, and for a sock_common
        bpf_sock_common_is_valid_access (no type, protocol, mark or priority)."""
        if reg.smin < 0:
            raise Refuse(f"R{regno} min value is negative, either use unsigned index or do a "
                         "if (index >=0) check.")
        ok = bpf_sock_is_valid_access(off, size)
        if reg.t == SOCK_COMMON and _BPF_SOCK_TYPE <= off < _BPF_SOCK_SRC_IP4:
            ok = False
        if not ok:
            raise Refuse(f"R{regno} invalid {type_str(reg.t)} access off={off} size={size}")

    @staticmethod
    def _check_alignment(reg: Reg, off: int, size: int) -> None:
        """check_ptr_alignment under BPF_F_STRICT_ALIGNMENT (the stack is always strict)."""
        t = reg.t & 0xFF
        tn = _tn(reg)
        if t in (PKT, PKT_META):  # NET_IP_ALIGN is taken as 2 to catch what would fault
            v, m = t_add((reg.tv, reg.tm), ((2 + reg.off + off) & U64, 0))
            if (v | m) & (size - 1):
                raise Refuse(f"misaligned packet access off 2+{tn}+{reg.off}+{off} size {size}")
            return
        desc = {MAP_VALUE: "value ", MAP_KEY: "key ", CTX: "context ", STACK: "stack ",
                SOCK: "sock ", SOCK_COMMON: "sock_common "}.get(t, "")
        v, m = t_add((reg.tv, reg.tm), ((reg.off + off) & U64, 0))
        if (v | m) & (size - 1):
            raise Refuse(f"misaligned {desc}access off {tn}+{reg.off}+{off} size {size}")

    def _map_bytes(self, m: MapSpec) -> bytes | None:
        for k, v in m.contents:
            if isinstance(v, bytes) and k[:4] == bytes(4):
                return v.ljust(m.value_size, b"\0")
        return bytes(m.value_size) if m.is_global_data else None

    def _region(self, regno: int, reg: Reg, off: int, size: int, msize: int,
                what: str, zero_ok: bool = False) -> None:
        """check_mem_region_access (``zero_ok``: a helper's size may be zero)."""
        if reg.smin < 0 and (reg.smin == S64_MIN or not -(1 << 31) <= off + reg.smin
                             < (1 << 31) or reg.smin + off < 0):
            raise Refuse(f"R{regno} min value is negative, either use unsigned index or do a "
                         "if (index >=0) check.")
        if not self._fits(reg.smin + off, size, msize, zero_ok):
            raise Refuse(f"R{regno} min value is outside of the allowed memory range")
        if reg.umax >= BPF_MAX_VAR_OFF:
            raise Refuse(f"R{regno} unbounded memory access, make sure to bounds check any "
                         "such access")
        if not self._fits(reg.umax + off, size, msize, zero_ok):
            raise Refuse(f"R{regno} max value is outside of the allowed memory range")

    @staticmethod
    def _fits(off: int, size: int, msize: int, zero_ok: bool = False) -> bool:
        return off >= 0 and (size > 0 or zero_ok) and off + size <= msize

    def _pkt(self, regno: int, reg: Reg, off: int, size: int, zero_ok: bool = False) -> None:
        """check_packet_access."""
        if reg.smin < 0:
            raise Refuse(f"R{regno} min value is negative, either use unsigned index or do a "
                         "if (index >=0) check.")
        if reg.rng < 0:  # compared at or beyond data_end: no access fits, and -EINVAL says so
            raise Refuse(f"R{regno} offset is outside of the packet", errno.EINVAL)
        if not self._fits(off, size, reg.rng, zero_ok):
            raise Refuse(f"R{regno} offset is outside of the packet")

    @staticmethod
    def _ctx_ptr_off(regno: int, reg: Reg) -> None:
        """__check_ptr_off_reg for the context: its pointer unmoved."""
        if reg.off < 0:
            raise Refuse(f"negative offset ctx ptr R{regno} off={reg.off} disallowed")
        if reg.off:
            raise Refuse(f"dereference of modified ctx ptr R{regno} off={reg.off} disallowed")
        if not reg.const or reg.tv:
            raise Refuse(f"variable ctx access var_off={_tn(reg)} "
                         "disallowed")

    def _ctx(self, regno: int, reg: Reg, off: int, size: int, write: bool,
             sx: bool = False) -> Reg | None:
        self._ctx_ptr_off(regno, reg)
        if self.syscall:  # syscall_prog_is_valid_access: any scalar, read or written
            if not (0 <= off < _SYSCALL_CTX_MAX and off % size == 0):
                raise Refuse(f"invalid bpf_context access off={off} size={size}")
            return None
        ok = 0 <= off < XDP_MD_SIZE and off % size == 0 and size == 4 and not write
        if off == _EGRESS_IFINDEX and not self.devmap:
            ok = False
        if sx and off in _CTX_PTRS:  # xdp_is_valid_access: no pointer is sign-extended
            ok = False
        if not ok:
            raise Refuse(f"invalid bpf_context access off={off} size={size}")
        t = _CTX_PTRS.get(off)
        if t is None:
            return None
        r = Reg()
        r.set_ptr(t)
        return r

    def _stack(self, st: State, regno: int, reg: Reg, off: int, size: int, write: bool,
               value: Reg | None, imm: Reg | None) -> Reg | None:
        frame = st.frames[reg.frame]
        if reg.tm != 0:
            v, m = t_add((reg.tv, reg.tm), (off & U64, 0))
            if (v | m) & (size - 1):  # strict for a variable offset too
                raise Refuse(f"misaligned stack access off {_tn(reg)}+"
                             f"{reg.off}+{off - reg.off} size {size}")
            return self._stack_var(st, frame, regno, reg, off, size, write)
        lo = off + _s64(reg.tv)
        if lo % size:  # check_ptr_alignment comes first; stack accesses are strict
            raise Refuse(f"misaligned stack access off {_tn(reg)}+"
                         f"{reg.off}+{off - reg.off} size {size}")
        if lo < -MAX_BPF_STACK or lo + size > 0 or (lo >= 0 and size == 0):
            kind = "write to" if write else "read from"
            raise Refuse(f"invalid {kind} stack R{regno} off={off} size={size}",
                         _stack_oob_errno(lo))
        self._note_depth(frame, -lo)
        spi = (-lo - 1) // 8
        k = lo + 8 * (spi + 1)  # byte index in the slot, 0 = lowest address
        # insn_stack_access_flags: the history records the slot of a spill, of a fill
        # restoring a spilled register and of an atomic, not of other data (backtracking
        # looks for the slot's spill further back then)
        tag = (st.hist[-1] & _HIST_PC) | _HIST_STACK | reg.frame << 21 | spi << 24 \
            if st.hist else 0
        types, spill = frame.slot(spi)
        if write:
            self._stack_write(st, frame, spi, k, size, value, imm, regno)
            if tag and (frame.slot(spi)[1] is not None or
                        self.insns[self.pc].code & 0xE0 == op.BPF_ATOMIC):
                st.hist[-1] = tag
            if size == 8:
                self.stack_live.write(reg.frame, spi)
            return None
        self._stack_read(st, reg.frame, spi)
        if spill is not None and types[0] == S_SPILL and types[k] == S_SPILL:
            # a fill restoring the spilled register (whole, or its low bytes, or all the
            # bytes of a spilled zero): the history records the slot
            n = 0
            while n < 8 and types[n] == S_SPILL:
                n += 1
            if (k == 0 and size <= n) or (spill.t == SCALAR and spill.tm == 0 and
                                          spill.tv == 0 and k + size <= n):
                if tag:
                    st.hist[-1] = tag
                self._jh_push(st)
        if spill is not None and types[k] == S_SPILL:
            spill_size = 0
            while spill_size < 8 and types[spill_size] == S_SPILL:
                spill_size += 1
            if size == 8 and spill_size == 8:
                return spill.copy()
            if spill.t != SCALAR:
                raise Refuse("invalid size of register fill")
            if k == 0 and size <= spill_size:
                if size == 4 and spill_size == 4 and spill.umax <= U32:
                    # a fill of a 4-byte spill stays linked to it
                    spill = frame.spill_w(spi)
                    assert spill is not None
                    self._id_before_mov(spill)
                r = spill.copy()
                if spill.umax >> (8 * size):
                    r.id = 0
                return r
        for j in range(k, k + size):
            if types[j] in _SPECIAL_SLOTS:  # check_stack_read_fixed_off: no special slot is data
                raise Refuse(f"invalid read from stack off {lo}+{j - k} size {size}")
        zeros = sum(1 for j in range(k, k + size) if types[j] == S_ZERO)
        spills = sum(1 for j in range(k, k + size) if types[j] == S_SPILL)
        r = Reg()
        if zeros == size or (spills == size and spill is not None and spill.t == SCALAR and
                             spill.tm == 0 and spill.tv == 0):  # bytes of a spilled zero
            r.set_known(0)
        else:
            r.set_unknown()
        return r

    def _stack_var(self, st: State, frame: Frame, regno: int, reg: Reg, off: int, size: int,
                   write: bool) -> Reg | None:
        _stack_var_bounded(regno, reg, write)
        lo, hi = reg.smin + off, reg.smax + off + size
        if reg.smin < -MAX_BPF_STACK or lo < -MAX_BPF_STACK or hi > 0:
            kind = "write to" if write else "read from"
            raise Refuse(f"invalid variable-offset {kind} stack R{regno} "
                         f"var_off={tnum_str((reg.tv, reg.tm))} off={off} size={size}",
                         _stack_oob_errno(lo))
        self._note_depth(frame, -lo)
        if not write:
            self._stack_read_range(st, reg.frame, lo, hi)
        if write:
            for a in range(lo, hi):
                spi = (-a - 1) // 8
                k = a + 8 * (spi + 1)
                self._destroy_dynptr(st, frame, spi)
                types, spill = frame.slot(spi)
                b = bytearray(x if x != S_SPILL else S_MISC for x in types)
                if b[k] != S_MISC:
                    b[k] = S_MISC
                frame.set_slot(spi, (bytes(b), None))
        return None  # a read: an unknown scalar

    def _destroy_dynptr(self, st: State, frame: Frame, spi: int) -> None:
        """destroy_if_dynptr_stack_slot: a write into a dynptr's slot ends the dynptr (both
        slots invalid) and every slice of it."""
        types, d = frame.slot(spi)
        if d is None or types[0] != S_DYNPTR:
            return
        if d.ref:  # dynptr_type_refcounted: a ringbuf dynptr must be submitted or discarded
            raise Refuse("cannot overwrite referenced dynptr", errno.EINVAL)
        other = spi - 1 if d.off else spi + 1
        frame.set_slot(spi, _EMPTY)
        frame.set_slot(other, _EMPTY)
        for r in st.all_regs():
            # Linux compares the whole type: a packet dynptr's slices (DYNPTR_TYPE_XDP)
            # are never matched, so they stay valid
            if r.t in (MEM, MEM | MAYBE_NULL) and r.rng == d.id:
                r.set_unknown()

    def _note_depth(self, frame: Frame, depth: int) -> None:
        if depth > self.depth.get(frame.sub, 0):
            self.depth[frame.sub] = depth
        self._fastcall_contract(frame.sub, -depth)

    # -- bpf_fastcall: spills and fills around an inlined call that the kernel removes ------
    def _mark_fastcall_patterns(self) -> None:
        """mark_fastcall_patterns: in each function, the 8-byte spills of caller-saved
        registers the call does not clobber right before a call of a helper or kfunc, each
        filled back right after from the same slot (no jump landing among them), from the
        function's lowest spill slot up. The stack they use is not counted once the call
        is inlined (bpf_get_smp_processor_id, bpf_cast_to_kern_ctx, bpf_rdonly_cast),
        unless another access reaches it (_fastcall_contract)."""
        insns, n = self.insns, len(self.insns)
        second = {pc + 1 for pc, i in enumerate(insns) if i.code == op.OP_LD_IMM64}
        targets: set[int] = set()  # the jump_target marks check_cfg leaves
        for pc, i in enumerate(insns):
            if pc in second:
                continue
            cls, o = i.code & 7, i.code & 0xF0
            if i.code == op.OP_LD_IMM64 and i.src == op.PseudoSrc.BPF_PSEUDO_FUNC:
                targets.add(pc + 1 + i.imm)
            elif cls in (op.BPF_JMP, op.BPF_JMP32) and o != op.BPF_EXIT:
                if o == op.BPF_CALL:
                    if i.src == op.CallSrc.BPF_PSEUDO_CALL:
                        targets.add(pc + 1 + i.imm)
                else:
                    targets.add(pc + 1 + (i.imm if i.code == op.OP_JA32 else i.off))
        starts = sorted(self.starts)
        for start, end in zip(starts, [*starts[1:], n], strict=True):
            lowest = min((i.off for i in insns[start:end] if i.code == _STX_DW and i.dst == 10),
                         default=0)
            for pc in range(start, end):
                if insns[pc].code == op.OP_CALL and pc not in second:
                    self._mark_fastcall_call(start, pc, lowest, targets)

    def _mark_fastcall_call(self, sub: int, pc: int, lowest: int, targets: set[int]) -> None:
        """mark_fastcall_pattern_for_call."""
        i, insns = self.insns[pc], self.insns
        if i.src == op.CallSrc.BPF_HELPER_CALL:
            proto = PROTOS.get(i.imm)
            if proto is None:
                return
            clobbered = (proto.ret != Ret.VOID) | sum(2 << n for n in range(len(proto.args)))
            inlined = i.imm == 8  # bpf_get_smp_processor_id: the x86-64 JIT's per-CPU load
        elif i.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL:
            name = self.kfunc_at.get(pc, "")
            kp = KFUNCS.get(name)
            if kp is None:
                return
            clobbered = (kp.ret != KRet.VOID) | sum(2 << n for n in range(len(kp.params)))
            inlined = name in ("bpf_cast_to_kern_ctx", "bpf_rdonly_cast")
        else:
            return
        expected = ~clobbered & 0x3F
        k, off = 1, lowest
        while k <= 5:
            if pc - k < 0 or pc + k >= len(insns) or pc - k + 1 in targets or \
                    pc + k in targets:
                break
            stx, ldx = insns[pc - k], insns[pc + k]
            if stx.code != _STX_DW or ldx.code != _LDX_DW or stx.dst != 10 or ldx.src != 10 \
                    or stx.src != ldx.dst or not (1 << stx.src) & expected or \
                    stx.off != off or ldx.off != off:
                break
            expected &= ~(1 << stx.src)
            self.fc_pattern.update((pc - k, pc + k))
            k, off = k + 1, off + 8
        if k == 1:
            return
        if inlined:
            self.fc_spills[pc] = k - 1
        else:
            self.fc_keep.add(sub)
        self.fc_off[sub] = min(self.fc_off.get(sub, 0), off)

    def _fastcall_contract(self, sub: int, off: int) -> None:
        """check_fastcall_stack_contract: an access at ``off`` below the fastcall slots by
        something else than a pattern keeps every pattern of the function."""
        if self.fc_off.get(sub, 0) <= off or self.pc in self.fc_pattern:
            return
        self.fc_off[sub] = -(1 << 15)
        later = [x for x in self.starts if x > sub]
        for pc in range(sub, min(later, default=len(self.insns))):
            self.fc_spills.pop(pc, None)
            self.fc_pattern.discard(pc)

    def _remove_fastcall_spills(self) -> None:
        """remove_fastcall_spills_fills: a function whose patterns go keeps only the stack
        above them."""
        starts = sorted(self.starts)
        for start, end in zip(starts, [*starts[1:], len(self.insns)], strict=True):
            if start not in self.fc_keep and any(self.fc_spills.get(pc, 0) > 0
                                                 for pc in range(start, end)):
                self.depth[start] = -self.fc_off[start]

    @staticmethod
    def _spill_types(types: bytes, size: int) -> bytes:
        """save_register_state: ``size`` spilled bytes; the rest of the slot stays zero or
        invalid, else becomes misc (mark_stack_slot_misc)."""
        rest = (x if x in (S_ZERO, S_INVALID) else S_MISC for x in types[size:])
        return bytes([S_SPILL] * size) + bytes(rest)

    def _stack_write(self, st: State, frame: Frame, spi: int, k: int, size: int,
                     value: Reg | None, imm: Reg | None, regno: int) -> None:
        self._destroy_dynptr(st, frame, spi)
        types, spill = frame.slot(spi)
        if value is not None and k == 0 and value.t == SCALAR:
            fits = size == 8 or not value.umax >> (8 * size)
            if fits:  # a fill stays linked to the register (narrowing breaks the link)
                self._id_before_mov(value)
            r = value.copy()
            if not fits:
                r.id = 0
            frame.set_slot(spi, (self._spill_types(types, size), r))
            self._jh_push(st)  # a spill: the history records its slot
            return
        if value is None and k == 0 and imm is not None:
            frame.set_slot(spi, (self._spill_types(types, size), imm))
            self._jh_push(st)
            return
        # is_spillable_regtype: a CONST_PTR_TO_DYNPTR is not; written, it is data
        if value is not None and value.t not in (SCALAR, DYNPTR):
            if size != 8:
                raise Refuse("invalid size of register spill")
            if value.t == STACK and frame is not st.cur and value.frame == st.cur.frameno:
                raise Refuse("cannot spill pointers to stack into stack frame of the caller",
                             errno.EINVAL)
            frame.set_slot(spi, (bytes([S_SPILL] * 8), value.copy()))
            self._jh_push(st)
            return
        b = bytearray(types)
        if spill is not None and b[0] == S_SPILL:
            # is_stack_slot_special, scrub_spilled_slot: a write over a spill's slot makes
            # every byte of it misc, a zero byte beside a narrow spill too
            b = bytearray(x if x == S_INVALID else S_MISC for x in b)
        zero = (value is not None and value.is_null()) or (imm is not None and imm.is_null())
        if zero and value is not None:
            # STACK_ZERO because the stored register is known zero: its value decided that
            src = st.cur.regs.index(value)
            self._mark_precise(st, [src])
        for j in range(k, k + size):
            b[j] = S_ZERO if zero else S_MISC
        frame.set_slot(spi, (bytes(b), None))

    # -- jumps ------------------------------------------------------------------------------
    def _cond_jmp(self, st: State, i: Instruction, pc: int,
                  stack: list[tuple[State, int]]) -> int:
        regs = st.frames[-1].regs
        o = i.code & 0xF0
        is32 = (i.code & 7) == op.BPF_JMP32
        d = self._read(regs, i.dst)
        if i.code & op.BPF_X:
            s = self._read(regs, i.src)
        else:
            s = _known(i.imm)
        taken_pc = pc + 1 + i.off
        pred = self._branch_taken(d, s, o, is32)
        if pred >= 0:  # the verdict relies on the values that decided the branch
            marks = [i.dst] if d.t == SCALAR else []
            if i.code & op.BPF_X and s.t == SCALAR:
                marks.append(i.src)
            self._mark_precise(st, marks)
            return taken_pc if pred else pc + 1
        # collect_linked_regs: kept in the history before the branch is copied
        link: list[tuple[int, int]] = []
        if i.code & op.BPF_X and s.t == SCALAR and s.id:
            self._collect_linked(st, s.id, link)
        if d.t == SCALAR and d.id:
            self._collect_linked(st, d.id, link)
        if len(link) > 1:
            st.links[len(st.hist) - 1] = tuple(link)
            self._jh_push(st)
        other = st.copy()
        oregs = other.frames[-1].regs
        od = oregs[i.dst]
        os_ = oregs[i.src] if i.code & op.BPF_X else s.copy()
        if o in (op.BPF_JEQ, op.BPF_JNE) and not is32 and i.code & op.BPF_X and \
                d.t != SCALAR and s.t != SCALAR and d.t & 0xFF != BTF_ID and s.t & 0xFF != BTF_ID:
            # Two pointers equal: one known not to be NULL makes the other not NULL where
            # they are equal (only that register: copies keep their MAYBE_NULL). Linux
            # leaves PTR_TO_BTF_ID out: such a pointer may be NULL without the flag.
            eq = (other if o == op.BPF_JEQ else st).cur.regs
            if _reg_not_null(d) and s.t & MAYBE_NULL:
                self._ptr_not_null(eq[i.src])
            if _reg_not_null(s) and d.t & MAYBE_NULL:
                self._ptr_not_null(eq[i.dst])
        if d.t == SCALAR and s.t == SCALAR:
            taken = self._refine(od, os_, o, is32)
            if self._refine(d, s, _NEG.get(o, _JSET_NOT), is32) or taken:  # fall-through
                for r, what in ((od, "true_reg1"), (os_, "true_reg2"), (d, "false_reg1"),
                                (s, "false_reg2")):
                    self._sane(r, what)
            for stt, a, b in ((other, od, os_), (st, d, s)):
                # the source's links first, then the destination's: two linked operands
                # end with the destination's bounds
                if i.code & op.BPF_X:
                    self._sync_ids(stt, b)
                self._sync_ids(stt, a)
        elif o in (op.BPF_JEQ, op.BPF_JNE) and not is32 and (
                (d.t & MAYBE_NULL and s.is_null()) or (s.t & MAYBE_NULL and d.is_null())):
            ptr_is_dst = bool(d.t & MAYBE_NULL)
            pid = (d if ptr_is_dst else s).id
            null_in_taken = o == op.BPF_JEQ
            self._mark_null(other if null_in_taken else st, pid, True)
            self._mark_null(st if null_in_taken else other, pid, False)
        elif not is32 and i.code & op.BPF_X and d.t in (PKT, PKT_META, PKT_END) and \
                s.t in (PKT, PKT_META, PKT_END):
            self._pkt_cmp(st, other, i)
        self._push(other, taken_pc, stack)
        return pc + 1

    @staticmethod
    def _collect_linked(st: State, rid: int, link: list[tuple[int, int]]) -> None:
        """__collect_linked_regs: the scalars with id ``rid``, the current frame first; past
        LINKED_REGS_MAX the id is dropped (the scalar is no longer linked)."""
        rid &= ~BPF_ADD_CONST  # linked with an offset or not
        for fi in range(len(st.frames) - 1, -1, -1):
            f = st.frames[fi]
            for r in range(10):
                x = f.regs[r]
                if x.t == SCALAR and x.id & ~BPF_ADD_CONST == rid:
                    if len(link) < LINKED_REGS_MAX:
                        link.append((fi, r))
                    else:
                        x.id = 0
            for spi, (types, spill) in enumerate(f.stack):
                if spill is not None and spill.t == SCALAR and \
                        spill.id & ~BPF_ADD_CONST == rid and types[0] == S_SPILL:
                    if len(link) < LINKED_REGS_MAX:
                        link.append((fi, -1 - spi))
                    else:
                        f.spill_w(spi).id = 0  # type: ignore[union-attr]

    def _pkt_cmp(self, this: State, other: State, i: Instruction) -> None:
        """try_match_pkt_pointers: ranges after comparing with data_end (or data); the
        compared pointer itself is marked at or beyond the end where it is (mark_pkt_end)."""
        o = i.code & 0xF0
        d, s = this.cur.regs[i.dst], this.cur.regs[i.src]

        def fwd(a: Reg, b: Reg) -> bool:  # a is a packet pointer, b its end
            return (a.t == PKT and b.t == PKT_END) or (
                a.t == PKT_META and b.t == PKT and b.off == 0 and b.const and b.tv == 0)
        if fwd(d, s):
            regno = i.dst
            cases = {op.BPF_JGT: (this, False), op.BPF_JLT: (other, True),
                     op.BPF_JGE: (this, True), op.BPF_JLE: (other, False)}
        elif fwd(s, d):
            regno = i.src
            cases = {op.BPF_JGT: (other, True), op.BPF_JLT: (this, False),
                     op.BPF_JGE: (other, False), op.BPF_JLE: (this, True)}
        else:
            return
        hit = cases.get(o)
        if hit is None:
            return
        state, right_open = hit
        ptr = this.cur.regs[regno]
        end_state = other if state is this else this
        marked = end_state.cur.regs[regno]
        if marked.t == PKT:
            marked.rng = _BEYOND_PKT_END if not right_open else _AT_PKT_END
        if ptr.off < 0 or (ptr.off == 0 and right_open):
            return
        if ptr.umax > MAX_PACKET_OFF or ptr.umax + ptr.off > MAX_PACKET_OFF:
            return
        new = ptr.off + (1 if right_open else 0)
        pid, pt = ptr.id, ptr.t
        # the larger range kept: a copy marked at or beyond the end (negative) gets it too
        for r in state.with_id(pid):
            if r.t == pt and r.rng < new:
                r.rng = new

    def _mark_null(self, st: State, pid: int, is_null: bool) -> None:
        """mark_ptr_or_null_regs: every copy of the pointer ``pid`` is NULL or not NULL."""
        for r in st.with_id(pid):
            if not r.t & MAYBE_NULL:
                continue
            if is_null:
                r.set_known(0)
            elif self._ptr_not_null(r):
                # reg_may_point_to_spin_lock: the id tells which element is locked
                if not r.ref and not (r.t == MAP_VALUE and r.map is not None and
                                      self._lock_off(r.map) is not None) and \
                        not (r.t & 0xFF == BTF_ID and r.t & ALLOC and not r.t & PERCPU and
                             "bpf_spin_lock" in dict(self._obj_fields(r.sub))):
                    r.id = 0
        if is_null:
            st.refs = [x for x in st.refs if x[0] != pid]

    @staticmethod
    def _ptr_not_null(r: Reg) -> bool:
        """mark_ptr_not_null_reg: a lookup in a map of maps gives the inner map; else the
        pointer loses MAYBE_NULL. False when it became a map pointer."""
        if r.t & 0xFF == MAP_VALUE and r.map is not None and r.map.type in (
                MT.BPF_MAP_TYPE_ARRAY_OF_MAPS, MT.BPF_MAP_TYPE_HASH_OF_MAPS) \
                and r.map.inner is not None:
            inner = r.map.inner
            r.set_ptr(MAP_PTR)
            r.map = inner
            return False
        if r.t & 0xFF == MAP_VALUE and r.map is not None and r.map.type in (
                MT.BPF_MAP_TYPE_SOCKMAP, MT.BPF_MAP_TYPE_SOCKHASH):
            r.t = SOCK  # a socket map's value is a socket
            return True
        r.t &= ~MAYBE_NULL
        return True

    def _sync_ids(self, st: State, r: Reg) -> None:
        """sync_linked_regs: the scalars linked to ``r`` take its new bounds, shifted by
        the difference of their offsets (not across a 32- and a 64-bit offset)."""
        if r.t != SCALAR or not r.id:
            return
        base = r.id & ~BPF_ADD_CONST
        for x in st.all_regs(lambda x: x is not r and x.t == SCALAR and
                             x.id & ~BPF_ADD_CONST == base):
            if (x.id ^ r.id) & BPF_ADD_CONST == BPF_ADD_CONST:
                continue
            if not (x.id | r.id) & BPF_ADD_CONST or x.off == r.off:
                x.assign(r)
                continue
            xid, xoff = x.id, x.off
            x.assign(r)
            self._scalar_bounds(x, _known(xoff - r.off), op.BPF_ADD, True)
            x.id, x.off = xid, xoff
            if (xid | r.id) & BPF_ADD_CONST32:
                x.zext32()
                x.sync()

    @staticmethod
    def _view(r: Reg, is32: bool) -> tuple[int, int, int, int, int, int]:
        if is32:
            return r.s32min, r.s32max, r.u32min, r.u32max, r.tv & U32, r.tm & U32
        return r.smin, r.smax, r.umin, r.umax, r.tv, r.tm

    def _branch_taken(self, d: Reg, s: Reg, o: int, is32: bool) -> int:
        if d.t != SCALAR or s.t != SCALAR:
            if not is32 and d.t in (PKT, PKT_META, PKT_END) and s.t in (PKT, PKT_META, PKT_END):
                return self._pkt_branch_taken(d, s, o)
            # (measured on 6.18: a jmp32 against a pointer is never decided, its low
            # half may be zero)
            if o in (op.BPF_JEQ, op.BPF_JNE) and not is32:
                for p, z in ((d, s), (s, d)):
                    if z.t == SCALAR and z.is_null() and _reg_not_null(p):
                        return 0 if o == op.BPF_JEQ else 1
            return -1
        a1, a2, u1, u2, v1, m1 = self._view(d, is32)
        b1, b2, w1, w2, v2, m2 = self._view(s, is32)
        if o in (op.BPF_JEQ, op.BPF_JNE):
            eq: int = -1
            if m1 == 0 and m2 == 0:
                eq = 1 if v1 == v2 else 0
            elif u1 > w2 or u2 < w1 or a1 > b2 or a2 < b1 or (v1 ^ v2) & ~(m1 | m2):
                eq = 0
            elif not is32 and (d.u32min > s.u32max or d.u32max < s.u32min or
                               d.s32min > s.s32max or d.s32max < s.s32min):
                eq = 0  # the subregisters' ranges cannot meet either
            if eq == -1:
                return -1
            return eq if o == op.BPF_JEQ else 1 - eq
        if o == op.BPF_JSET:
            if m2 != 0:  # the constant may be either operand (is_scalar_branch_taken)
                v1, m1, v2, m2 = v2, m2, v1, m1
            if m2 == 0:
                if v1 & ~m1 & v2:
                    return 1
                if not (v1 | m1) & v2:
                    return 0
            return -1
        if o == op.BPF_JGT:
            return 1 if u1 > w2 else 0 if u2 <= w1 else -1
        if o == op.BPF_JGE:
            return 1 if u1 >= w2 else 0 if u2 < w1 else -1
        if o == op.BPF_JLT:
            return 1 if u2 < w1 else 0 if u1 >= w2 else -1
        if o == op.BPF_JLE:
            return 1 if u2 <= w1 else 0 if u1 > w2 else -1
        if o == op.BPF_JSGT:
            return 1 if a1 > b2 else 0 if a2 <= b1 else -1
        if o == op.BPF_JSGE:
            return 1 if a1 >= b2 else 0 if a2 < b1 else -1
        if o == op.BPF_JSLT:
            return 1 if a2 < b1 else 0 if a1 >= b2 else -1
        if o == op.BPF_JSLE:
            return 1 if a2 <= b1 else 0 if a1 > b2 else -1
        return -1

    @staticmethod
    def _pkt_branch_taken(d: Reg, s: Reg, o: int) -> int:
        """is_pkt_ptr_branch_taken: a pointer known at or beyond data_end."""
        if s.t == PKT_END:
            pkt = d
        elif d.t == PKT_END:
            pkt, o = s, _FLIP[o]
        else:
            return -1
        if pkt.rng >= 0:
            return -1
        if o in (op.BPF_JLE, op.BPF_JGT) and pkt.rng == _BEYOND_PKT_END:
            return 1 if o == op.BPF_JGT else 0
        if o in (op.BPF_JLT, op.BPF_JGE):
            return 1 if o == op.BPF_JGE else 0
        return -1

    def _refine(self, r1: Reg, r2: Reg, o: int, is32: bool) -> bool:
        """regs_refine_cond_op: what the branch's outcome says about both registers; True
        when their bounds may have become impossible (the branch is dead)."""
        if o in (op.BPF_JGE, op.BPF_JGT, op.BPF_JSGE, op.BPF_JSGT):
            r1, r2, o = r2, r1, _FLIP[o]
        if is32:
            if o == op.BPF_JEQ:
                lo, hi = max(r1.u32min, r2.u32min), min(r1.u32max, r2.u32max)
                slo, shi = max(r1.s32min, r2.s32min), min(r1.s32max, r2.s32max)
                t = t_intersect((r1.tv & U32, r1.tm & U32), (r2.tv & U32, r2.tm & U32))
                for r in (r1, r2):
                    r.u32min, r.u32max, r.s32min, r.s32max = lo, hi, slo, shi
                    r.tv = (r.tv & ~U32 & U64) | t[0]
                    r.tm = (r.tm & ~U32 & U64) | t[1]
            elif o == op.BPF_JNE:
                for a, b in ((r1, r2), (r2, r1)):
                    if b.sub_const():
                        v = b.tv & U32
                        if a.u32min == v and a.u32min < a.u32max:
                            a.u32min += 1
                        elif a.u32max == v and a.u32min < a.u32max:
                            a.u32max -= 1
                        if a.s32min == _s32(v) and a.s32min < a.s32max:
                            a.s32min += 1
                        elif a.s32max == _s32(v) and a.s32min < a.s32max:
                            a.s32max -= 1
            elif o == op.BPF_JSET or o == _JSET_NOT:
                self._refine_jset(r1, r2, o, U32)
            elif o == op.BPF_JLE:
                r1.u32max = min(r1.u32max, r2.u32max)
                r2.u32min = max(r2.u32min, r1.u32min)
            elif o == op.BPF_JLT:
                r1.u32max = min(r1.u32max, r2.u32max - 1)
                r2.u32min = max(r2.u32min, r1.u32min + 1)
            elif o == op.BPF_JSLE:
                r1.s32max = min(r1.s32max, r2.s32max)
                r2.s32min = max(r2.s32min, r1.s32min)
            elif o == op.BPF_JSLT:
                r1.s32max = min(r1.s32max, r2.s32max - 1)
                r2.s32min = max(r2.s32min, r1.s32min + 1)
        else:
            if o == op.BPF_JEQ:
                lo, hi = max(r1.umin, r2.umin), min(r1.umax, r2.umax)
                slo, shi = max(r1.smin, r2.smin), min(r1.smax, r2.smax)
                t = t_intersect((r1.tv, r1.tm), (r2.tv, r2.tm))
                # the 64-bit compare intersects only the 64-bit bounds (each keeps its
                # 32-bit ones until the sync narrows them)
                for r in (r1, r2):
                    r.umin, r.umax, r.smin, r.smax = lo, hi, slo, shi
                    r.tv, r.tm = t
            elif o == op.BPF_JNE:
                for a, b in ((r1, r2), (r2, r1)):
                    if b.tm == 0:
                        v = b.tv
                        if a.umin == v and a.umin < a.umax:
                            a.umin += 1
                        elif a.umax == v and a.umin < a.umax:
                            a.umax -= 1
                        if a.smin == _s64(v) and a.smin < a.smax:
                            a.smin += 1
                        elif a.smax == _s64(v) and a.smin < a.smax:
                            a.smax -= 1
            elif o == op.BPF_JSET or o == _JSET_NOT:
                self._refine_jset(r1, r2, o, U64)
            elif o == op.BPF_JLE:
                r1.umax = min(r1.umax, r2.umax)
                r2.umin = max(r2.umin, r1.umin)
            elif o == op.BPF_JLT:
                r1.umax = min(r1.umax, r2.umax - 1)
                r2.umin = max(r2.umin, r1.umin + 1)
            elif o == op.BPF_JSLE:
                r1.smax = min(r1.smax, r2.smax)
                r2.smin = max(r2.smin, r1.smin)
            elif o == op.BPF_JSLT:
                r1.smax = min(r1.smax, r2.smax - 1)
                r2.smin = max(r2.smin, r1.smin + 1)
        # both synced (a register compared with itself twice), an impossible range too
        dead = False
        for r in (r1, r2):
            if r.umin <= r.umax and r.smin <= r.smax and r.u32min <= r.u32max and \
                    r.s32min <= r.s32max and (r.tm or r.possible()):
                r.sync()  # (an impossible range it makes is all reg_bounds_sanity_check sees)
                dead = dead or r.umin > r.umax or r.smin > r.smax or r.u32min > r.u32max or \
                    r.s32min > r.s32max
            else:
                r.sync_raw()
                dead = True
        return dead

    def _sane(self, r: Reg, ctx: str) -> None:
        """reg_bounds_sanity_check: impossible bounds (a dead branch walked) are a verifier
        bug Linux logs and survives, the ranges forgotten and the tnum kept; under
        BPF_F_TEST_REG_INVARIANTS they are a refusal."""
        why = r.invariants_violation()
        if why is None:
            return
        msg = f"verifier bug: REG INVARIANTS VIOLATION ({ctx}): {why} {r.bounds_str()}"
        if self.spec.flags & BPF_F_TEST_REG_INVARIANTS:
            raise Refuse(msg, errno.EFAULT)
        self.log.append(msg)
        r.unbound()

    @staticmethod
    def _refine_jset(r1: Reg, r2: Reg, o: int, mask: int) -> None:
        if not (r2.tm & mask == 0):
            r1, r2 = r2, r1
        if r2.tm & mask:
            return
        val = r2.tv & mask
        if o == op.BPF_JSET:
            if val and not val & (val - 1):
                r1.tv, r1.tm = t_or((r1.tv, r1.tm), (val, 0))
        else:
            # the ranges are forgotten before the tnum narrows (Linux 6.18: no invariant
            # violation on a dead branch), then come from the tnum alone
            r1.smin, r1.smax, r1.umin, r1.umax = S64_MIN, S64_MAX, 0, U64
            r1.s32min, r1.s32max, r1.u32min, r1.u32max = S32_MIN, S32_MAX, 0, U32
            r1.tv, r1.tm = t_and((r1.tv, r1.tm), ((~val) & (U64 if mask == U64 else
                                                            (U64 & ~U32) | (~val & U32)),
                                                  0))

    # -- calls ------------------------------------------------------------------------------
    def _call(self, st: State, i: Instruction, pc: int, stack: list[tuple[State, int]]) -> int:
        if st.locks:
            if i.src == op.CallSrc.BPF_PSEUDO_CALL and pc + 1 + i.imm in self.globals:
                self.log.append("global function calls are not allowed while holding a lock,")
                raise Refuse("use static function instead", errno.EINVAL)
            kf = self.kfunc_at.get(pc)
            # (a kfunc outside the table is UnsupportedHelper below: its verdict unknown;
            # the sleepable ones and the trap are refused, the lock checked first)
            if (i.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL and
                    (kf in KFUNCS or kf in SLEEPABLE_KFUNCS or kf == TRAP_KFUNC) and
                    kf not in _SPIN_ALLOWED_KFUNCS) or (
                    i.src == op.CallSrc.BPF_HELPER_CALL and i.imm != 94):
                raise Refuse("function calls are not allowed while holding a lock",
                             errno.EINVAL)
        if i.src == op.CallSrc.BPF_PSEUDO_CALL:
            # (with preemption disabled a global function is called as elsewhere: only
            # one that might sleep is refused, as in any XDP program)
            return self._subprog_call(st, pc + 1 + i.imm, pc)
        if i.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL:
            return self._kfunc_call(st, pc, stack)
        # (a tail call from a subprogram leaves it there: _helper_call walks that exit)
        return self._helper_call(st, i.imm, pc, stack)

    def _subprog_call(self, st: State, target: int, pc: int) -> int:
        g = self.globals.get(target)
        if g is not None:
            return self._global_call(st, g, target, pc)
        if len(st.frames) >= MAX_CALL_FRAMES:
            raise Refuse(f"the call stack of {len(st.frames) + 1} frames is too deep",
                         errno.E2BIG)
        caller = st.cur
        callee = Frame(len(st.frames), pc, target)
        for r in range(1, 6):
            callee.regs[r].assign(caller.regs[r])
        for r in range(6):
            caller.regs[r].__init__()  # type: ignore[misc]
        st.frames.append(callee)
        return target

    @staticmethod
    def _check_retval(r0: Reg, what: str, hi: int, name: str = "R0") -> None:
        """A callback's R0 at its exit (``name``: the register bpf_throw returns) must be
        a scalar within [0, hi]."""
        if r0.t != SCALAR:
            raise Refuse(f"At {what} return the register {name} is not a known value "
                         f"({type_str(r0.t)})", errno.EINVAL)
        if not (r0.smin >= 0 and r0.smax <= hi):
            has = (f" smin={r0.smin}" if r0.smin > S64_MIN else "") + \
                (f" smax={r0.smax}" if r0.smax < S64_MAX else "")
            raise Refuse(f"At {what} return the register {name} has"
                         f"{has or ' unknown scalar value'} should have been in [0, {hi}]",
                         errno.EINVAL)

    def _exit(self, st: State, pc: int) -> int | None:
        regs = st.cur.regs
        if len(st.frames) > 1:
            # prepare_func_exit hands R0 back unread: a void function may leave it unset,
            # and only a read in the caller is refused. No function returns a stack
            # pointer (its own or a caller's); a callback returns a scalar, read.
            r0 = regs[0]
            if r0.t == STACK:
                raise Refuse("cannot return stack pointer to the caller", errno.EINVAL)
            if st.frames[-1].callback:
                if r0.t != SCALAR:
                    raise Refuse("R0 not a scalar value")
                r0 = self._read(regs, 0)
                self._mark_precise(st, [0])  # from the callback's own frame
            # prepare_func_exit brings the live slots of the callee's chain up to date
            # (and through its entry, its callers') before the frame goes
            self.stack_live.update(st.frames)
            callee = st.frames.pop()
            if callee.callback:
                self._check_retval(r0, "callback", 1)
                # back to the call, which calls the callback again (or not, once the
                # states converge there); scalars the body changed are widened
                prev = self._prev_entry(st, callee.callsite, here=True)
                if prev is not None:
                    self._widen(prev, st)
                return callee.callsite
            st.cur.regs[0].assign(r0)
            return callee.callsite + 1
        # process_bpf_exit_full: check_resource_leak, then check_return_code (R0 read)
        self._resource_leak(st, "BPF_EXIT instruction in main prog")
        r0 = self._read(regs, 0)
        if st.cur.callback == _ASYNC_CB:  # an async callback returns 0
            self._check_retval(r0, "async callback", 0)
        # check_return_code: an exception callback returns as the program does
        if self.in_global and not self.in_exc_cb and r0.t != SCALAR:
            raise Refuse("At subprogram exit the register R0 is not a scalar value "
                         f"({type_str(r0.t)})", errno.EINVAL)
        return None

    def _resource_leak(self, st: State, prefix: str) -> None:
        """check_resource_leak at the main program's exit or a bpf_throw (any frame):
        no lock, reference, saved IRQ state, RCU section or disabled preemption left."""
        if st.locks:
            raise Refuse(f"{prefix} cannot be used inside bpf_spin_lock-ed region",
                         errno.EINVAL)
        if st.refs:
            rid, at = st.refs[0]
            self.log.append(f"Unreleased reference id={rid} alloc_insn={at}")
            raise Refuse(f"{prefix} would lead to reference leak", errno.EINVAL)
        if st.irqs:
            raise Refuse(f"{prefix} cannot be used inside bpf_local_irq_save-ed region",
                         errno.EINVAL)
        if st.rcu:
            raise Refuse(f"{prefix} cannot be used inside bpf_rcu_read_lock-ed region",
                         errno.EINVAL)
        if st.preempt:
            raise Refuse(f"{prefix} cannot be used inside bpf_preempt_disable-ed region",
                         errno.EINVAL)

    # -- global functions (btf_check_subprog_call, do_check_subprogs) ---------------------
    def _global_args(self, g: _Global) -> tuple[_GArg, ...]:
        """btf_prepare_func_args: each argument's type."""
        if g.args is not None:
            return g.args
        btf = self.btf
        assert btf is not None
        proto = btf.type_by_id(g.proto)
        ret = btf.resolved(proto.type) if proto.type else None
        if ret is None or ret.kind not in (BtfKind.INT, BtfKind.ENUM, BtfKind.ENUM64):
            raise Refuse(f"Global function {g.name}() doesn't return scalar. Only those are "
                         "supported.", errno.EINVAL)
        if len(proto.params) > 5:
            raise Refuse(f"Global function {g.name}() with {len(proto.params)} > 5 args. "
                         "Buggy compiler.", errno.EINVAL)
        out: list[_GArg] = []
        for n, prm in enumerate(proto.params):
            tags = self._arg_tags(g, n)
            t = btf.resolved(prm.type)
            if t.kind is not BtfKind.PTR:
                if tags:
                    raise Refuse(f"arg#{n} has pointer tag, but is not a pointer type",
                                 errno.EINVAL)
                if t.kind not in (BtfKind.INT, BtfKind.ENUM, BtfKind.ENUM64):
                    raise Refuse(f"Arg#{n} type {t.kind.name} in {g.name}() is not supported "
                                 "yet.", errno.EINVAL)
                out.append(_GArg("scalar"))
                continue
            pointee = btf.resolved(t.type) if t.type else None
            if pointee is not None and pointee.kind is BtfKind.UNKN:
                pointee = None  # (const) void
            # btf_is_prog_ctx_type: XDP's context struct (a syscall program's is void *)
            if "ctx" in tags or (not self.syscall and pointee is not None and
                                 pointee.kind is BtfKind.STRUCT and pointee.name == "xdp_md"):
                if tags - {"ctx"}:
                    raise Refuse(f"arg#{n} has invalid combination of tags", errno.EINVAL)
                if tags and pointee is not None:  # btf_validate_prog_ctx_type: void * too
                    if not pointee.name:
                        raise Refuse(f"arg#{n} type doesn't have a name", errno.EINVAL)
                    if pointee.kind is not BtfKind.STRUCT or pointee.name != "xdp_md":
                        raise Refuse(f"arg#{n} should be `struct xdp_md *`", errno.EINVAL)
                out.append(_GArg("ctx"))
                continue
            if pointee is not None and pointee.name == "bpf_dynptr" and (
                    pointee.kind is BtfKind.STRUCT or
                    (pointee.kind is BtfKind.FWD and not pointee.kind_flag)):
                if tags:
                    raise Refuse(f"arg#{n} has invalid combination of tags", errno.EINVAL)
                out.append(_GArg("dynptr"))  # btf_is_dynptr_ptr: ARG_PTR_TO_DYNPTR | MEM_RDONLY
                continue
            if "trusted" in tags:
                if "nonnull" in tags:
                    raise Refuse(f"arg#{n} has invalid combination of tags", errno.EINVAL)
                out.append(_GArg("trusted_nullable" if "nullable" in tags else "trusted",
                                 struct=self._kernel_type(n, t.type)))
                continue
            if "arena" in tags:
                if tags - {"arena"}:
                    raise Refuse(f"arg#{n} arena cannot be combined with any other tags",
                                 errno.EINVAL)
                out.append(_GArg("arena"))
                continue
            if "nullable" in tags:  # only a trusted pointer may be __arg_nullable
                raise Refuse(f"arg#{n} has invalid combination of tags", errno.EINVAL)
            try:  # btf_resolve_size: void has none, an empty struct has 0 bytes
                size: int | None = btf.resolve_size(t.type) if pointee is not None else None
            except ObjectError:
                size = None
            if size is None:
                what = btf.describe(t.type) if t.type else "void"
                raise Refuse(f"arg#{n} reference type('{what}') size cannot be determined: "
                             f"-{errno.EINVAL}", errno.EINVAL)
            out.append(_GArg("mem_nonnull" if "nonnull" in tags else "mem", size))
        g.args = tuple(out)
        return g.args

    def _kernel_type(self, n: int, type_id: int) -> str:
        """btf_get_ptr_to_btf_id: the name of the kernel type an ``__arg_trusted`` pointer
        points to, found as CO-RE finds candidates (``bpf_core_find_cands``: the same kind
        and essential name, ``___flavour`` suffixes dropped) in the kernel's BTF; none or
        several refuse it."""
        btf = self.btf
        assert btf is not None
        t = btf.resolved(type_id)
        kind_str = t.kind.name  # btf_type_str: "STRUCT", "UNION", ...
        if not t.name:
            raise Refuse(f"arg#{n} reference type('{kind_str} ') candidate matching error: "
                         f"-{errno.EINVAL}", errno.EINVAL)
        essential = t.name.split("___")[0] if "___" in t.name[1:] else t.name
        kernel = core_target()
        found = [c for c in kernel.find_flavours(essential)
                 if kernel.type_by_id(c).kind is t.kind]
        if len(found) != 1:
            raise Refuse(f"arg#{n} reference type('{kind_str} {t.name}') "
                         f"{'has no matches' if not found else 'is ambiguous'}",
                         errno.ENOENT if not found else errno.ESRCH)
        return kernel.type_by_id(found[0]).name

    def _arg_tags(self, g: _Global, n: int) -> set[str]:
        """The ``arg:<tag>`` decl tags of argument ``n`` of ``g`` (``__arg_ctx``...)."""
        btf = self.btf
        assert btf is not None
        tags = set()
        for t in btf.types:
            if t.kind is BtfKind.DECL_TAG and t.type == g.func and t.component_idx == n and \
                    t.name.startswith("arg:"):
                tag = t.name[4:]
                if tag not in ("ctx", "trusted", "nonnull", "nullable", "arena"):
                    raise Refuse(f"arg#{n} has unsupported set of tags", errno.EOPNOTSUPP)
                tags.add(tag)
        return tags

    def _global_call(self, st: State, g: _Global, target: int, pc: int) -> int:
        regs = st.cur.regs
        if self._might_sleep(target) and (not (self.syscall and self.spec.flags &
                                               BPF_F_SLEEPABLE) or st.rcu or st.irqs or
                                          st.preempt):
            self.log.extend(("global functions that may sleep are not allowed in "
                             "non-sleepable context,",
                             "i.e., in a RCU/IRQ/preempt-disabled section, or in"))
            raise Refuse("a non-sleepable BPF program context", errno.EINVAL)
        try:
            for n, (kind, size, struct) in enumerate(self._global_args(g)):
                reg = regs[n + 1]
                if kind in ("trusted", "trusted_nullable"):
                    self._trusted_arg(n, reg, struct, kind == "trusted_nullable")
                elif kind == "scalar":
                    if reg.t != SCALAR:
                        raise Refuse(f"R{n + 1} is not a scalar", errno.EINVAL)
                elif kind == "ctx":
                    self._arg_reg_off(n + 1, reg)
                    if reg.t != CTX:
                        raise Refuse(f"arg#{n} expects pointer to ctx", errno.EINVAL)
                elif kind == "dynptr":  # an initialised one, which the callee only reads
                    self._arg_reg_off(n + 1, reg)
                    self._dynptr_arg(st, regs, n + 1, n, False, g.name, _KfuncMeta())
                elif kind == "arena":  # PTR_TO_ARENA (not modelled) or any scalar
                    if reg.t != SCALAR:
                        raise Refuse(f"R{n + 1} is not a pointer to arena or scalar.",
                                     errno.EINVAL)
                else:
                    self._global_mem_arg(st, n, reg, size, kind == "mem")
        except Refuse as e:
            # Linux returns the argument check's own error (-EACCES for a modified pointer)
            self.log.append(e.msg)
            raise Refuse(f"Caller passes invalid args into func#{g.index} ('{g.name}')",
                         e.err) from None
        g.called = True
        if self._might_throw(target):
            # the call may unwind the program as a bpf_throw there would: that path exits
            # at once (process_bpf_exit_full), nothing may be held
            self._resource_leak(st, "bpf_throw")
        if self._changes_pkt_data(target):
            for x in st.all_regs():
                if x.t in (PKT, PKT_META, PKT_END) or x.t & PKT_SLICE:
                    x.set_unknown()
        for r in range(6):
            regs[r].__init__()  # type: ignore[misc]
        regs[0].set_unknown()
        return pc + 1

    def _trusted_arg(self, n: int, reg: Reg, struct: str, nullable: bool) -> None:
        """btf_check_func_arg_match of an ``ARG_PTR_TO_BTF_ID | PTR_TRUSTED`` argument:
        NULL where nullable; else a trusted register, check_reg_type (a pointer to the
        kernel struct) and check_func_arg_reg_off."""
        if nullable and reg.is_null():
            return
        probe = reg
        if nullable and reg.t & MAYBE_NULL:  # check_reg_type folds the flag the arg allows
            probe = reg.copy()
            probe.t &= ~MAYBE_NULL
        if not _is_trusted_reg(probe):
            raise Refuse(f"R{n + 1} must be referenced or trusted", errno.EINVAL)
        t = reg.t & ~MAYBE_NULL if nullable else reg.t
        if t & ~TRUSTED != BTF_ID:
            raise Refuse(f"R{n + 1} type={type_str(reg.t)} expected=ptr_, trusted_ptr_, "
                         "rcu_ptr_")
        if reg.bt != struct:
            raise Refuse(f"R{n + 1} is of type {reg.bt} but {struct} is expected")
        self._arg_reg_off(n + 1, reg)

    def _global_mem_arg(self, st: State, n: int, reg: Reg, size: int, nullable: bool) -> None:
        """A pointer to ``size`` bytes (check_mem_reg): NULL, or memory the callee may read
        and write; a maybe-NULL one only where the argument is not ``__arg_nonnull``."""
        self._arg_reg_off(n + 1, reg)
        if reg.is_null():
            if not nullable:  # Linux 6.18 (measured) refuses NULL itself too
                raise Refuse(f"arg#{n} is expected to be non-NULL", errno.EINVAL)
            return
        mem = reg
        if reg.t & MAYBE_NULL:
            mem = reg.copy()
            mem.t &= ~MAYBE_NULL
        try:
            self._helper_mem(st, n + 1, mem, size, write=False, zero_ok=True)
            self._helper_mem(st, n + 1, mem, size, write=True, zero_ok=True)
        except Refuse as e:  # check_mem_reg fails with -EINVAL, whatever failed in it
            raise Refuse(e.msg, errno.EINVAL) from None
        if not nullable and reg.t & MAYBE_NULL:
            raise Refuse(f"arg#{n} is expected to be non-NULL", errno.EINVAL)

    def _reaches_call(self, sub: int, hit: Callable[[int, Instruction], bool],
                      seen: set[int] | None = None) -> bool:
        """Whether the function at ``sub`` (or one it calls) has a call instruction
        ``hit(pc, insn)`` holds for (check_cfg's walks of the call graph)."""
        seen = seen if seen is not None else set()
        seen.add(sub)
        start, end = next(f for f in self.layout.functions if f[0] == sub)
        if any(hit(pc, self.insns[pc]) for pc in range(start, end)
               if self.insns[pc].code == op.OP_CALL):
            return True
        return any(self._reaches_call(c, hit, seen) for c in self.layout.calls.get(sub, ())
                   if c not in seen)

    def _might_sleep(self, sub: int) -> bool:
        """Whether the function at ``sub`` (or one it calls) calls a helper or kfunc that
        might sleep (check_cfg's might_sleep)."""
        def hit(pc: int, i: Instruction) -> bool:
            if i.src == op.CallSrc.BPF_HELPER_CALL:
                return i.imm in MIGHT_SLEEP_HELPERS
            return (i.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL
                    and self.kfunc_at.get(pc, "") in SLEEPABLE_KFUNCS)
        return self._reaches_call(sub, hit)

    def _might_throw(self, sub: int) -> bool:
        """Whether the function at ``sub`` (or one it calls) has a bpf_throw call, reached
        or not."""
        return self._reaches_call(sub, lambda pc, i: (
            i.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL and
            self.kfunc_at.get(pc, "") == THROW_KFUNC))

    def _changes_pkt_data(self, sub: int) -> bool:
        """Whether the function at ``sub`` (or one it calls) calls a helper that changes
        packet data (check_cfg's changes_pkt_data)."""
        def hit(pc: int, i: Instruction) -> bool:
            if i.src == op.CallSrc.BPF_HELPER_CALL:
                return i.imm in _PKT_CHANGING or i.imm == 12  # a tail call may change it too
            if i.src == op.CallSrc.BPF_PSEUDO_KFUNC_CALL:
                kp = KFUNCS.get(self.kfunc_at.get(pc, ""))
                return kp is not None and kp.pkt_data
            return False
        return self._reaches_call(sub, hit)

    def _check_global_subprogs(self) -> None:
        """do_check_subprogs: every global function called, verified on its own."""
        done: set[int] = set()
        while True:
            todo = [s for s, g in sorted(self.globals.items()) if g.called and s not in done]
            if not todo:
                return
            sub = todo[0]
            done.add(sub)
            g = self.globals[sub]
            st = State()
            f = Frame(0, -1, sub)
            args = self._global_args(g)
            self.in_exc_cb = sub == self.exc_cb
            if self.in_exc_cb and (len(args) != 1 or args[0].kind != "scalar"):
                raise Refuse("exception cb only supports single integer argument",
                             errno.EINVAL)
            for n, (kind, size, struct) in enumerate(args):
                r = f.regs[n + 1]
                if kind in ("trusted", "trusted_nullable"):
                    r.set_ptr(BTF_ID | TRUSTED | (MAYBE_NULL if kind != "trusted" else 0))
                    r.bt = struct
                    if kind != "trusted":
                        r.id = self._new_id()
                elif kind == "scalar":
                    r.set_unknown()
                elif kind == "ctx":
                    r.set_ptr(CTX)
                elif kind == "dynptr":  # taken as a LOCAL dynptr, whatever the caller's is
                    r.set_ptr(DYNPTR)
                    r.sub = _DYNPTR_LOCAL
                    r.id = self._new_id()
                elif kind == "arena":
                    r.set_unknown()
                else:
                    r.set_ptr(MEM | (MAYBE_NULL if kind == "mem" else 0))
                    r.msize = size
                    r.id = self._new_id()
            st.frames.append(f)
            self.kept = {}
            self.in_global = True
            self._do_check(st, sub)

    def _helper_call(self, st: State, fid: int, pc: int,
                     stack: list[tuple[State, int]]) -> int:
        name = _helper_name(fid)
        proto = PROTOS.get(fid)
        if self.syscall and fid not in SYSCALL_MODELLED:
            if not (0 <= fid < len(HELPER_NAMES)):
                raise Refuse(f"invalid func {name}#{fid}", errno.EINVAL)
            if fid in SYSCALL_HELPERS:
                raise UnsupportedHelper(f"{self.spec.name}: helper {name}#{fid} is allowed in "
                                        "syscall programs by Linux but pyxdp does not "
                                        "provide it there", pc=pc, helper_id=fid)
            raise Refuse(f"program of this type cannot use helper {name}#{fid}", errno.EINVAL)
        if fid == BPF_FUNC_KPTR_XCHG:
            return self._kptr_xchg(st, pc)
        if fid in (BPF_FUNC_PER_CPU_PTR, BPF_FUNC_THIS_CPU_PTR):
            return self._percpu_ptr(st, fid, pc)
        if proto is None:
            if not (0 <= fid < len(HELPER_NAMES)):
                raise Refuse(f"invalid func {name}#{fid}", errno.EINVAL)
            if fid in MIGHT_SLEEP_HELPERS:  # XDP never sleeps: refused before the arguments
                if MIGHT_SLEEP_HELPERS[fid] and not self.gpl:
                    raise Refuse("cannot call GPL-restricted function from non-GPL compatible "
                                 "program", errno.EINVAL)
                raise Refuse("helper call might sleep in a non-sleepable prog", errno.EINVAL)
            if fid in UNMODELLED_XDP_HELPERS:
                raise UnsupportedHelper(f"{self.spec.name}: helper {name}#{fid} is allowed in "
                                        "XDP by Linux but pyxdp does not provide it",
                                        pc=pc, helper_id=fid)
            raise Refuse(f"program of this type cannot use helper {name}#{fid}", errno.EINVAL)
        if proto.gpl_only and not self.gpl:
            raise Refuse("cannot call GPL-restricted function from non-GPL compatible program",
                         errno.EINVAL)
        regs = st.cur.regs
        meta = _CallMeta()
        for n, arg in enumerate(proto.args, start=1):
            self._arg(st, regs, n, arg, proto.args, meta, fid)
        if fid == 12 and meta.map is not None:
            # record_func_key: a constant index within the prog array is kept for the
            # call's direct-jump patch, so its value is precise
            idx = regs[3]
            if idx.t == SCALAR and idx.tm == 0 and idx.tv < meta.map.max_entries:
                self._mark_precise(st, [3])
        if meta.func is not None and fid == BPF_FUNC_TIMER_SET_CALLBACK:
            assert meta.map is not None
            self._push_async(st, meta.func, meta.map, stack)
        elif meta.func is not None:
            if fid == BPF_FUNC_LOOP:  # as many callbacks as R1 may ask for, so precise
                self._loop_inline_state(st, pc, meta.func)
                if regs[1].t != SCALAR:  # mark_chain_precision's sanity check (any R1 passes)
                    raise Refuse("verifier bug: backtracking misuse", errno.EFAULT)
                self._mark_precise(st, [1])
                if st.cur.cb_depth < regs[1].umax:
                    self._push_callback(st, fid, meta.func, meta, pc, stack)
                else:
                    st.cur.cb_depth = 0
            else:
                self._push_callback(st, fid, meta.func, meta, pc, stack)
        if meta.ref:
            self._release(st, meta.ref)
        if fid == 12:  # check_resource_leak(env, false, true, "tail_call")
            self._tail_call_leak(st)
        if meta.dynptr_release:
            self._unmark_dynptr(st, meta.dynptr_release)
        if fid == BPF_FUNC_DYNPTR_FROM_MEM and regs[1].t != MAP_VALUE:
            raise Refuse(f"Unsupported reg type {type_str(regs[1].t)} for bpf_dynptr_from_mem "
                         "data")
        if fid == BPF_FUNC_SNPRINTF:  # check_bpf_snprintf_call: data is an array of u64
            if regs[5].tv % 8:
                raise Refuse("", errno.EINVAL)  # (Linux says nothing)
            if not bprintf_ok(meta.fmt, regs[5].tv // 8):
                raise Refuse("Invalid format string", errno.EINVAL)
        if meta.bad_map:  # check_map_func_compatibility: after the arguments and callbacks
            assert meta.map is not None
            raise Refuse(f"cannot pass map_type {meta.map.type} into func {name}#{fid}",
                         errno.EINVAL)
        for r in range(6):
            regs[r].__init__()  # type: ignore[misc]
        r0 = regs[0]
        if proto.ret == Ret.INTEGER:
            r0.set_unknown()
        elif proto.ret == Ret.VOID:
            r0.t = NOT_INIT
        elif proto.ret == Ret.MAP_VALUE_OR_NULL:
            m = meta.map
            assert m is not None
            key = meta.const_key
            if fid == 1 and m.type in (MT.BPF_MAP_TYPE_ARRAY, MT.BPF_MAP_TYPE_PERCPU_ARRAY) \
                    and key is not None and 0 <= key < m.max_entries:
                r0.set_ptr(MAP_VALUE)  # can_elide_value_nullness
                if self._lock_off(m) is not None:  # the id tells which element is locked
                    r0.id = self._new_id()
            else:
                r0.set_ptr(MAP_VALUE | MAYBE_NULL)
                r0.id = self._new_id()
                if fid == 1 and m.type in (MT.BPF_MAP_TYPE_SOCKMAP, MT.BPF_MAP_TYPE_SOCKHASH):
                    # is_acquire_function: a socket reference, to release with
                    # bpf_sk_release
                    r0.ref = r0.id
                    st.refs.append((r0.id, pc))
            r0.map = m
        elif proto.ret in (Ret.SOCKET_OR_NULL, Ret.SOCK_COMMON_OR_NULL):
            r0.set_ptr((SOCK if proto.ret == Ret.SOCKET_OR_NULL else SOCK_COMMON) | MAYBE_NULL)
            self._new_id()  # the maybe-NULL id, replaced by the reference's (acquire)
            r0.id = r0.ref = self._new_id()
            st.refs.append((r0.id, pc))
        elif proto.ret == Ret.TASK_TRUSTED:
            r0.set_ptr(BTF_ID | TRUSTED)
            r0.bt = "task_struct"
        elif proto.ret == Ret.BTF_ID_OR_NULL:
            r0.set_ptr(BTF_ID | MAYBE_NULL)
            r0.bt = proto.ret_struct
            r0.id = self._new_id()
            r0.ref = meta.ref_obj  # is_ptr_cast_function: released with the socket
        elif proto.ret == Ret.DYNPTR_MEM_OR_NULL:
            # a slice of the dynptr: invalidated with it (dynptr_id) and released with
            # its reference (ref_obj_id)
            r0.set_ptr(MEM | MAYBE_NULL)
            r0.msize = meta.mem_size
            r0.id = self._new_id()
            r0.rng = meta.dynptr_id
            r0.ref = meta.dynptr_ref
        else:
            r0.set_ptr(MEM | RINGBUF | MAYBE_NULL)
            r0.msize = meta.mem_size
            r0.id = r0.ref = self._new_id()
            st.refs.append((r0.id, pc))
        if fid in _PKT_CHANGING:
            self._clear_pkt_pointers(st)
        if fid == 12 and len(st.frames) > 1:
            # a tail call from a subprog returns to its caller with what the called
            # program returned: that path is walked now (packet pointers gone); the
            # failed call's, on in the subprog, is queued
            self._push(st.copy(), pc + 1, stack, errno.E2BIG)  # (as maybe_fork_scalars)
            self._clear_pkt_pointers(st)
            st.cur.regs[0].set_unknown()
            ret = self._exit(st, pc)
            assert ret is not None
            return ret
        return pc + 1

    @staticmethod
    def _clear_pkt_pointers(st: State) -> None:
        """clear_all_pkt_pointers, packet dynptrs' slices too."""
        for x in st.all_regs():
            if x.t in (PKT, PKT_META, PKT_END) or x.t & PKT_SLICE:
                x.set_unknown()

    # -- kfuncs (check_kfunc_call) ------------------------------------------------------------
    def _kfunc_call(self, st: State, pc: int, stack: list[tuple[State, int]]) -> int:
        name = self.kfunc_at.get(pc)
        if name is None and pc in self.kfunc_zero:  # check_kfunc_call: "skip for now"
            self.kfunc_zero_reached = True
            return pc + 1
        if name is None:
            raise InvalidProgram(f"{self.spec.name}: kfunc call at pc {pc} names no kernel "
                                 "function (no relocation)", pc=pc, rule="kfunc")
        if (name in NOT_FOR_XDP and not self.syscall) or pc in self.not_kfunc or \
                (name in NOT_FOR_SYSCALL and self.syscall) or \
                (name not in KFUNCS and self._untagged_kfunc(name)):
            # fetch_kfunc_meta: no kfunc for this program type
            raise Refuse(f"calling kernel function {name} is not allowed")
        if name == TRAP_KFUNC:  # check_kfunc_call: first the trap, then sleepable kfuncs
            raise Refuse("unexpected __bpf_trap() due to uninitialized variable?",
                         errno.EFAULT)
        if name in SLEEPABLE_KFUNCS and not self.syscall:  # an XDP program never sleeps
            raise Refuse(f"program must be sleepable to call sleepable kfunc {name}")
        proto = KFUNCS.get(name)
        if proto is None:
            raise UnsupportedHelper(f"{self.spec.name}: kfunc {name} is not modelled by "
                                    "pyxdp's verifier (its kernel verdict is unknown here)",
                                    pc=pc)
        if name in _RCU_PREEMPT:
            self._rcu_preempt(st, name)
        if name in ("bpf_res_spin_lock", "bpf_res_spin_lock_irqsave"):
            self._lock_failed(st, pc, stack)
        regs = st.cur.regs
        meta = _KfuncMeta()
        params = proto.params
        i = 0
        while i < len(params):
            i = self._kfunc_arg(st, regs, name, proto, i, meta)
        if name == _RBTREE_ADD:  # less is verified as a callback of the call
            assert meta.func is not None
            self._push_rbtree_cb(st, meta, pc, stack)
        if name == THROW_KFUNC:
            # without an exception callback the cookie is the return value: check_return_code
            # on R1 (XDP has no range, an async callback's, whatever frame throws, is 0);
            # then process_bpf_exit_full(exception_exit): every frame unwinds, nothing may
            # be held
            if self.exc_cb is None and st.frames[0].callback == _ASYNC_CB:
                self._check_retval(regs[1], "async callback", 0, "R1")
            self._resource_leak(st, "bpf_throw")
            return -1
        cast = self._kern_cast(proto, regs) if proto.ret in (KRet.KERN_CTX, KRet.RDONLY_CAST) \
            else self._obj_new_type(regs, proto.ret == KRet.PERCPU_OBJ_NEW) \
            if proto.ret in (KRet.OBJ_NEW, KRet.PERCPU_OBJ_NEW) \
            else self._graph_node_ret(meta, proto.ret == KRet.GRAPH_NODE) \
            if proto.ret in (KRet.GRAPH_NODE, KRet.GRAPH_NODE_NON_OWN) else None
        if meta.refcounted is not None:  # bpf_refcount_acquire: the same object, owned
            cast = Reg()
            cast.set_ptr(BTF_ID | ALLOC)
            cast.bt, cast.sub = meta.refcounted
        if meta.list_node_ref:  # a push: the list owns the object now
            self._list_pushed(st, meta.list_node_ref)
            self._release(st, meta.list_node_ref)
        if proto.flags & KF_RELEASE:
            if not meta.release_ref:
                raise Refuse(f"release kernel function {name} expects refcounted "
                             "PTR_TO_BTF_ID", errno.EINVAL)
            self._release(st, meta.release_ref)
        if proto.pkt_data:
            self._clear_pkt_pointers(st)
        if proto.async_cb:
            assert meta.map is not None and meta.func is not None
            self._push_async(st, meta.func, meta.map, stack,
                             _TASK_WORK_CB if name.startswith("bpf_task_work_") else _ASYNC_CB)
        for r in range(6):
            regs[r].__init__()  # type: ignore[misc]
        r0 = regs[0]
        if proto.ret == KRet.VOID:
            return pc + 1
        if proto.ret == KRet.SCALAR:
            r0.set_unknown()
            if name in ("bpf_res_spin_lock", "bpf_res_spin_lock_irqsave"):
                r0.set_known(0)  # the path where the lock is taken
            return pc + 1
        if cast is not None:
            r0.assign(cast)
            if proto.ret in (KRet.KERN_CTX, KRet.RDONLY_CAST):
                return pc + 1
        if proto.ret == KRet.RDONLY_MEM:
            r0.set_ptr(MEM | RDONLY)
            r0.msize = proto.ret_size
        elif proto.ret in (KRet.SLICE, KRet.SLICE_RDWR):
            r0.set_ptr(MEM | (RDONLY if proto.ret == KRet.SLICE else 0) |
                       (PKT_SLICE if meta.dynptr_kind == _DYNPTR_XDP else 0))
            r0.msize = meta.const_size
            r0.rng = meta.dynptr_id  # the slice's dynptr_id
            r0.ref = meta.dynptr_ref  # a ringbuf dynptr's slice goes with its reference
        elif proto.ret == KRet.BTF_ID_UNTRUSTED:  # check_kfunc_call's bpf_get_kmem_cache
            r0.set_ptr(BTF_ID | UNTRUSTED)
            r0.bt = proto.ret_struct
        elif cast is None:
            # an iterator's next: RCU pointers from a KF_RCU_PROTECTED one, else trusted
            r0.set_ptr(BTF_ID | (RCU if proto.flags & KF_RCU_PROTECTED else
                                 TRUSTED if proto.flags & KF_ITER_NEXT else 0))
            r0.bt = proto.ret_struct
        # is_kfunc_ret_null: an owned object's bpf_refcount_acquire is never NULL
        ret_null = bool(proto.flags & KF_RET_NULL) and not meta.owning
        if ret_null:
            r0.t |= MAYBE_NULL
            r0.id = self._new_id()
        if proto.flags & KF_ACQUIRE:
            ref = self._new_id()
            if ret_null:
                r0.id = ref
            r0.ref = ref
            st.refs.append((ref, pc))
        if proto.flags & KF_ITER_NEXT:
            assert meta.iter is not None
            # memory the iterator gives is its own (the ref_obj_id of check_kfunc_call's
            # PTR_TO_MEM): destroying the iterator invalidates it too
            if r0.t & 0xFF == MEM:
                it = st.frames[meta.iter[0]].slot(meta.iter[1])[1]
                assert it is not None
                r0.ref = it.ref
            self._iter_next(st, pc, meta.iter, stack)
        return pc + 1

    def _kern_cast(self, proto: KfuncProto, regs: list[Reg]) -> Reg:
        """check_special_kfunc: bpf_cast_to_kern_ctx gives a trusted pointer to the program
        type's kernel context (struct xdp_buff); bpf_rdonly_cast(obj, btf_id) an untrusted
        pointer to struct ``btf_id``, or read-only untrusted memory for void."""
        r = Reg()
        kbtf = self._kernel_btf()
        if proto.ret == KRet.KERN_CTX:
            r.set_ptr(BTF_ID | TRUSTED)
            r.bt = proto.ret_struct
            r.sub = kbtf.find(proto.ret_struct, BtfKind.STRUCT) or 0
            return r
        value = regs[2].tv
        tid = value & U32  # btf_type_by_id takes a u32
        if tid >= len(kbtf):
            raise Refuse(f"Unknown type ID {_s64(value)} passed to kfunc bpf_rdonly_cast",
                         errno.EINVAL)
        t = kbtf.type_by_id(tid)
        if t.kind in (BtfKind.STRUCT, BtfKind.UNION):
            r.set_ptr(BTF_ID | UNTRUSTED)
            r.bt, r.sub = t.name, tid
        elif tid == 0:
            r.set_ptr(MEM | RDONLY | UNTRUSTED)
        else:
            raise Refuse("kfunc bpf_rdonly_cast type ID argument must be of a struct or void",
                          errno.EINVAL)
        return r

    def _tail_call_leak(self, st: State) -> None:
        """check_resource_leak for bpf_tail_call: nothing held that the exit would leak
        (check_reference_leak looks at references in the main frame only: a function's
        tail call leaves its callers' unchecked)."""
        if st.refs and len(st.frames) == 1:
            rid, at = st.refs[0]
            self.log.append(f"Unreleased reference id={rid} alloc_insn={at}")
            raise Refuse("tail_call would lead to reference leak", errno.EINVAL)
        if st.irqs:
            raise Refuse("tail_call cannot be used inside bpf_local_irq_save-ed region",
                         errno.EINVAL)
        if st.rcu:
            raise Refuse("tail_call cannot be used inside bpf_rcu_read_lock-ed region",
                         errno.EINVAL)
        if st.preempt:
            raise Refuse("tail_call cannot be used inside bpf_preempt_disable-ed region",
                         errno.EINVAL)

    @staticmethod
    def _rcu_preempt(st: State, name: str) -> None:
        """check_kfunc_call: an RCU read section is not nested; preemption is disabled
        as often as it is enabled again."""
        if name == "bpf_rcu_read_lock":
            if st.rcu:
                raise Refuse(f"nested rcu read lock (kernel function {name})", errno.EINVAL)
            st.rcu = True
        elif name == "bpf_rcu_read_unlock":
            if not st.rcu:
                raise Refuse(f"unmatched rcu read unlock (kernel function {name})",
                             errno.EINVAL)
            st.rcu = False
            for x in st.all_regs():  # RCU pointers and iterators outlive it only untrusted
                if x.t & 0xFF in (BTF_ID, ITER) and x.t & RCU:
                    x.t = x.t & ~(RCU | MAYBE_NULL) | UNTRUSTED
        elif name == "bpf_preempt_disable":
            st.preempt += 1
        else:
            if not st.preempt:
                raise Refuse("unmatched attempt to enable preemption (kernel function "
                             f"{name})", errno.EINVAL)
            st.preempt -= 1

    def _kfunc_arg(self, st: State, regs: list[Reg], name: str, proto: KfuncProto, i: int,
                   meta: _KfuncMeta) -> int:
        """check_kfunc_args for argument ``i``; the index of the next one."""
        p = proto.params[i]
        n = i + 1
        reg = regs[n]
        if p.kind == KArg.IGN:  # is_kfunc_arg_ignore: not even read
            return i + 1
        if p.kind in (KArg.SCALAR, KArg.CONST):
            if reg.t != SCALAR:
                raise Refuse(f"R{n} is not a scalar", errno.EINVAL)
            if p.kind == KArg.CONST and not reg.const:
                raise Refuse(f"R{n} must be a known constant", errno.EINVAL)
            if p.kind == KArg.CONST:
                self._mark_precise(st, [n])
            return i + 1
        if p.kind == KArg.ALLOC:
            self._alloc_arg(n, i, reg, meta, name)
            return i + 1
        if (reg.is_null() or reg.t & MAYBE_NULL) and not p.optional:
            raise Refuse(f"Possibly NULL pointer passed to trusted arg{i}")
        if p.kind == KArg.LIST_HEAD:
            self._list_head_arg(st, n, i, reg, meta)
            return i + 1
        if p.kind == KArg.LIST_NODE:
            self._list_node_arg(n, i, reg, meta)
            return i + 1
        if p.kind in (KArg.WORKQUEUE, KArg.TASK_WORK, KArg.MAP, KArg.CALLBACK):
            self._async_arg(n, i, reg, p.kind, meta)
            return i + 1
        if p.kind == KArg.RB_ROOT:
            self._graph_root_arg(st, n, i, reg, meta, "bpf_rb_root")
            return i + 1
        if p.kind == KArg.RB_NODE:
            self._rb_node_arg(st, n, i, reg, meta, name)
            return i + 1
        if p.kind == KArg.REFCOUNTED:
            self._refcounted_arg(n, i, reg, meta)
            return i + 1
        if p.optional and reg.is_null() and p.kind != KArg.MEM_SIZE:
            return i + 1
        if p.kind == KArg.CTX:
            if reg.t == CTX and reg.off:
                raise Refuse(f"dereference of modified ctx ptr R{n} off={reg.off} disallowed")
            if reg.t != CTX:
                raise Refuse(f"arg#{i} expected pointer to ctx, but got {type_str(reg.t)}",
                             errno.EINVAL)
            return i + 1
        if p.kind in (KArg.DYNPTR, KArg.DYNPTR_UNINIT):
            self._dynptr_arg(st, regs, n, i, p.kind == KArg.DYNPTR_UNINIT, name, meta)
            return i + 1
        if p.kind == KArg.ITER:
            self._iter_arg(st, regs, n, i, p, proto, meta, name)
            return i + 1
        if p.kind == KArg.IRQ_FLAG:
            if reg.t != STACK:
                raise Refuse(f"arg#{i} doesn't point to an irq flag on stack", errno.EINVAL)
            self._irq_flag(st, n, i, name in _IRQ_SAVE, _IRQ_CLASS[name])
            return i + 1
        if p.kind == KArg.CONST_STR:
            if reg.t != MAP_VALUE:
                raise Refuse(f"arg#{i} doesn't point to a const string", errno.EINVAL)
            self._const_str(n, reg)
            return i + 1
        if p.kind == KArg.RES_SPIN_LOCK:
            if reg.t != MAP_VALUE:
                raise Refuse(f"arg#{i} doesn't point to map value or allocated object",
                             errno.EINVAL)
            self._spin_lock(st, n, reg, _RES_LOCK_KFUNCS[name])
            return i + 1
        if self.syscall and reg.t == CTX and p.kind in (KArg.MEM, KArg.MEM_SIZE):
            self._ctx_ptr_off(n, reg)  # check_func_arg_reg_off: the unmoved context only
        if p.kind == KArg.MEM:
            if reg.is_null():
                return i + 1
            self._read(regs, n)
            self._helper_mem(st, n, reg, p.size, write=False)
            self._helper_mem(st, n, reg, p.size, write=True)
            return i + 1
        if p.kind == KArg.MEM_SIZE:
            size = regs[n + 1]
            if not (reg.is_null() and p.optional):
                try:
                    self._read(regs, n)
                    self._kfunc_mem_size(st, regs, n + 1)
                except Refuse as e:
                    self.log.append(e.msg)
                    raise Refuse(f"arg#{i} arg#{i + 1} memory, len pair leads to invalid "
                                 "memory access", e.err) from None
            if p.const_size:
                if size.t != SCALAR or not size.const:
                    raise Refuse(f"R{n + 1} must be a known constant", errno.EINVAL)
                meta.const_size = size.tv
            return i + 2
        # KF_ARG_PTR_TO_BTF_ID: a PTR_TO_BTF_ID, or a register reg2btf_ids names a struct
        has = reg.bt if reg.t & 0xFF == BTF_ID else _REG2BTF.get(reg.t & 0xFF)
        if has is None and p.struct not in _SKB_CTX:
            # get_kfunc_ptr_arg_type: no struct of scalars
            raise Refuse(f"arg#{i} pointer type STRUCT {p.struct} must point to scalar, or "
                         "struct with scalar", errno.EINVAL)
        if proto.flags & (KF_TRUSTED_ARGS | KF_RELEASE) and not _is_trusted_reg(reg):
            # a release kfunc's arguments are trusted ones too
            raise Refuse(f"R{n} must be referenced or trusted", errno.EINVAL)
        if proto.flags & KF_RCU and not _is_trusted_reg(reg) and not _is_rcu_reg(reg):
            raise Refuse(f"R{n} must be a rcu pointer", errno.EINVAL)
        # btf_struct_ids_match: a pointer moved into its struct is not one to the struct
        # (none of the kfuncs' structs begins another struct of its own type); one to a
        # struct whose first member is the expected struct is one to that, but for a
        # referenced release argument (strict_type_match)
        strict = bool(proto.flags & KF_RELEASE and reg.ref)
        same = has == p.struct or not reg.off and not strict and \
            self._begins_with(reg, p.struct)
        if not same or reg.off and not proto.flags & (KF_RELEASE | KF_TRUSTED_ARGS):
            raise Refuse(f"kernel function {name} args#{i} expected pointer to STRUCT "
                         f"{p.struct} but R{n} has a pointer to STRUCT {has}",
                         errno.EINVAL)
        if reg.ref and proto.flags & KF_RELEASE:
            meta.release_ref = reg.ref
        if (proto.flags & (KF_RELEASE | KF_TRUSTED_ARGS)) and (reg.off or not reg.const
                                                               or reg.tv):
            raise Refuse(f"R{n} must have zero offset when passed to release func or trusted "
                         "arg to kfunc", errno.EINVAL)
        return i + 1

    def _alloc_arg(self, n: int, i: int, reg: Reg, meta: _KfuncMeta, name: str) -> None:
        """KF_ARG_PTR_TO_ALLOC_BTF_ID: an object bpf_obj_new gave, whole (bpf_obj_drop): a
        release argument is a trusted one (not NULL; referenced, or only the trusted
        modifiers MEM_ALLOC and PTR_TRUSTED: an RCU pointer is not)."""
        if reg.is_null() or reg.t & MAYBE_NULL:
            raise Refuse(f"Possibly NULL pointer passed to trusted arg{i}")
        flags = reg.t & ~0xFF
        if not reg.ref and not (reg.t & 0xFF == BTF_ID and flags and
                                not flags & ~(ALLOC | TRUSTED)):
            raise Refuse(f"R{n} must be referenced or trusted", errno.EINVAL)
        # a per-CPU object goes to bpf_percpu_obj_drop, any other to bpf_obj_drop
        want = "bpf_percpu_obj_drop_impl" if reg.t & PERCPU else "bpf_obj_drop_impl"
        if reg.t not in (BTF_ID | ALLOC, BTF_ID | ALLOC | PERCPU):
            raise Refuse(f"arg#{i} expected pointer to allocated object", errno.EINVAL)
        if name != want:
            raise Refuse(f"arg#{i} expected for {want}()", errno.EINVAL)
        if not reg.ref:
            raise Refuse("allocated object must be referenced", errno.EINVAL)
        if reg.off or not reg.const or reg.tv:
            raise Refuse(f"R{n} must have zero offset when passed to release func or trusted "
                         "arg to kfunc", errno.EINVAL)
        meta.release_ref = reg.ref
        if name == "bpf_obj_drop_impl":
            self._call_type((0, self._meta(reg.sub)))

    def _list_head_arg(self, st: State, n: int, i: int, reg: Reg, meta: _KfuncMeta) -> None:
        """KF_ARG_PTR_TO_LIST_HEAD (process_kf_arg_ptr_to_list_head)."""
        self._graph_root_arg(st, n, i, reg, meta, "bpf_list_head")

    def _graph_root_arg(self, st: State, n: int, i: int, reg: Reg, meta: _KfuncMeta,
                        kind: str) -> None:
        """__process_kf_arg_ptr_to_graph_root: a map value's or an owned allocated
        object's bpf_list_head or bpf_rb_root (``kind``) at a constant offset, whose
        value's (object's) bpf_spin_lock this path holds (check_reg_allocation_locked)."""
        if reg.t not in (MAP_VALUE, BTF_ID | ALLOC):
            raise Refuse(f"arg#{i} expected pointer to map value or allocated object",
                         errno.EINVAL)
        if reg.t != MAP_VALUE and not reg.ref:
            raise Refuse("allocated object must be referenced", errno.EINVAL)
        if not reg.const:
            raise Refuse(f"R{n} doesn't have constant offset. {kind} has to be at the "
                         "constant offset", errno.EINVAL)
        off = reg.off + _s64(reg.tv)
        m = reg.map
        tid: int | None
        if m is None:  # an object: its struct's record (btf_find_struct_meta)
            assert self.btf is not None
            owner, tid = _OBJ_LOCK, reg.sub
            lock_off = dict(self._obj_fields(tid)).get("bpf_spin_lock")
        else:
            owner, tid, lock_off = m.name, m.value_type, self._lock_off(m)
        heads = self.graph_roots.get((kind, owner, tid))
        if heads is None:
            heads = self.graph_roots[kind, owner, tid] = {} if self.btf is None or \
                tid is None else self.btf.graph_roots(tid, kind)
        if off not in heads:
            raise Refuse(f"{kind} not found at offset={off & U32}", errno.EINVAL)
        if not any(t & REF_TYPE_LOCK_MASK and (mp, rid) == (owner, reg.id)
                   for t, mp, rid in st.locks):
            if st.locks:
                self.log.append("held lock and object are not in the same allocation")
            raise Refuse(f"bpf_spin_lock at off={lock_off} must be held for "
                         f"{kind}", errno.EINVAL)
        meta.graph_root = heads[off]

    def _list_node_arg(self, n: int, i: int, reg: Reg, meta: _KfuncMeta) -> None:
        """KF_ARG_PTR_TO_LIST_NODE (process_kf_arg_ptr_to_list_node): an owned object's
        bpf_list_node, the one of the struct and at the offset the head's
        ``__contains`` names."""
        if reg.t != BTF_ID | ALLOC:
            raise Refuse(f"arg#{i} expected pointer to allocated object", errno.EINVAL)
        if not reg.ref:
            raise Refuse("allocated object must be referenced", errno.EINVAL)
        if not reg.const:
            raise Refuse(f"R{n} doesn't have constant offset. bpf_list_node has to be at the "
                         "constant offset", errno.EINVAL)
        self._graph_node(reg, meta, "bpf_list_head", "bpf_list_node")
        meta.list_node_ref = reg.ref

    def _rb_node_arg(self, st: State, n: int, i: int, reg: Reg, meta: _KfuncMeta,
                     name: str) -> None:
        """KF_ARG_PTR_TO_RB_NODE: the add's an owned object, the others' a non-owning
        or owned (refcounted) one, not from within the add's less callback
        (in_rbtree_lock_required_cb); the tree's struct, at its node's offset
        (process_kf_arg_ptr_to_rbtree_node)."""
        if name == _RBTREE_ADD:
            if reg.t != BTF_ID | ALLOC:
                raise Refuse(f"arg#{i} expected pointer to allocated object", errno.EINVAL)
            if not reg.ref:
                raise Refuse("allocated object must be referenced", errno.EINVAL)
        else:
            if not reg.t & NON_OWN and not reg.ref:
                raise Refuse(f"{name} can only take non-owning or refcounted bpf_rb_node "
                             "pointer", errno.EINVAL)
            if st.cur.callback == _RBTREE_CB:
                raise Refuse(f"{name} not allowed in rbtree cb", errno.EINVAL)
        if not reg.const:
            raise Refuse(f"R{n} doesn't have constant offset. bpf_rb_node has to be at the "
                         "constant offset", errno.EINVAL)
        self._graph_node(reg, meta, "bpf_rb_root", "bpf_rb_node")
        if name == _RBTREE_ADD:
            meta.list_node_ref = reg.ref

    def _graph_node(self, reg: Reg, meta: _KfuncMeta, root: str, node: str) -> None:
        """__process_kf_arg_ptr_to_graph_node: ``reg`` at a ``node`` field of its
        object, of the struct and at the offset the ``root`` argument's ``__contains``
        names."""
        assert self.btf is not None and meta.graph_root is not None
        off = reg.off + _s64(reg.tv)
        if (node, off) not in self._obj_fields(reg.sub):
            raise Refuse(f"{node} not found at offset={off & U32}", errno.EINVAL)
        tid, node_off = meta.graph_root
        want = self.btf.types[tid].name
        if reg.sub != tid:
            raise Refuse(f"operation on {root} expects arg#1 {node} at "
                         f"offset={node_off} in struct {want}, but arg is at offset={off} "
                         f"in struct {reg.bt}", errno.EINVAL)
        if off != node_off:
            raise Refuse(f"arg#1 offset={off}, but expected {node} at offset="
                         f"{node_off} in struct {want}", errno.EINVAL)

    def _obj_fields(self, tid: int) -> list[tuple[str, int]]:
        """btf_find_struct_meta: the special fields of an object of the program's struct
        ``tid`` (bpf_obj_new refuses a struct whose record Linux refuses)."""
        got = self.obj_recs.get(tid)
        if got is None:
            assert self.btf is not None
            try:
                got = self.btf.obj_fields(tid)
            except FieldError:
                got = []
            self.obj_recs[tid] = got
        return got

    def _refcounted_arg(self, n: int, i: int, reg: Reg, meta: _KfuncMeta) -> None:
        """KF_ARG_PTR_TO_REFCOUNTED_KPTR: an owned or non-owning object whose struct
        holds a bpf_refcount; a non-owning one whole (check_func_arg_reg_off: not the
        node bpf_list_front gave)."""
        if reg.t & NON_OWN and reg.off:
            raise Refuse(f"dereference of modified {type_str(reg.t)} ptr R{n} off={reg.off} "
                         "disallowed")
        if reg.t & 0xFF != BTF_ID or not reg.t & ALLOC:
            raise Refuse(f"arg#{i} is neither owning or non-owning ref", errno.EINVAL)
        if not any(n == "bpf_refcount" for n, _ in self._obj_fields(reg.sub)):
            raise Refuse(f"arg#{i} doesn't point to a type with bpf_refcount field",
                         errno.EINVAL)
        meta.refcounted = (reg.bt, reg.sub)
        meta.owning = not reg.t & NON_OWN

    def _graph_node_ret(self, meta: _KfuncMeta, owning: bool) -> Reg:
        """mark_reg_graph_node: R0 the list's (tree's) struct at the node's offset; a
        peek's a non-owning reference (ref_set_non_owning)."""
        assert self.btf is not None and meta.graph_root is not None
        tid, node_off = meta.graph_root
        r = Reg()
        r.set_ptr(BTF_ID | ALLOC | (0 if owning else self._non_own(tid)))
        r.bt, r.sub, r.off = self.btf.types[tid].name, tid, node_off
        return r

    def _non_own(self, tid: int) -> int:
        """ref_set_non_owning's flags: a refcounted object's reference is an RCU one
        too (its object lives while another reference does)."""
        return NON_OWN | (RCU if any(n == "bpf_refcount" for n, _ in self._obj_fields(tid))
                          else 0)

    def _push_rbtree_cb(self, st: State, meta: _KfuncMeta, pc: int,
                        stack: list[tuple[State, int]]) -> None:
        """push_callback_call with set_rbtree_add_callback_state: less(a, b), both
        arguments non-owning references to nodes of the tree's struct, returning 0 or
        1."""
        assert meta.func is not None
        node = self._graph_node_ret(meta, False)

        def args(f: Frame, regs: list[Reg]) -> None:
            f.regs[1].assign(node)
            f.regs[2].assign(node)
        self._enter_callback(st, _RBTREE_CB, meta.func, pc, stack, args)

    def _list_pushed(self, st: State, ref: int) -> None:
        """ref_convert_owning_non_owning: every copy of the pushed object becomes a
        non-owning reference (the release that follows spares them)."""
        for r in st.all_regs(lambda r: r.ref == ref):
            r.ref = 0
            r.t |= self._non_own(r.sub)

    @staticmethod
    def _invalidate_non_owning(st: State) -> None:
        """invalidate_non_owning_refs: at an unlock, what was on a list may be gone."""
        for r in st.all_regs(lambda r: bool(r.t & NON_OWN)):
            r.set_unknown()

    def _obj_new_type(self, regs: list[Reg], percpu: bool) -> Reg:
        """check_kfunc_call for bpf_obj_new: R0 an object of the program's struct whose
        BTF id R1 holds (PTR_TO_BTF_ID | MEM_ALLOC); for bpf_percpu_obj_new a struct of
        scalars no larger than 512 bytes, MEM_PERCPU."""
        value = regs[1].tv
        if value >> 32:
            raise Refuse("local type ID argument must be in range [0, U32_MAX]", errno.EINVAL)
        btf = self.btf
        if btf is None:
            raise Refuse("bpf_obj_new/bpf_percpu_obj_new requires prog BTF", errno.EINVAL)
        t = btf.type_by_id(value) if 0 < value < len(btf.types) else None
        if t is None or t.kind is not BtfKind.STRUCT:
            raise Refuse("bpf_obj_new/bpf_percpu_obj_new type ID argument must be of a struct",
                         errno.EINVAL)
        if percpu:
            self._percpu_obj_type(value)
        held = [btf.resolved(m.type).name for m in t.members
                if btf.resolved(m.type).kind is BtfKind.STRUCT and
                btf.resolved(m.type).name in _OBJ_SPECIAL - _OBJ_MODELLED]
        try:  # btf_parse_struct_metas: objects may be refcounted list nodes
            held += [n for n, _ in btf.obj_fields(value) if n not in _OBJ_MODELLED]
        except FieldError as e:
            held.append(str(e))
        if held:
            raise UnsupportedHelper(
                f"{self.spec.name}: bpf_obj_new of struct {t.name}, which holds "
                f"{held[0]}: objects with special fields are not modelled by pyxdp",
                pc=self.pc)
        if not percpu:
            self._call_type((t.size_type, self._meta(value)))
        r = Reg()
        r.set_ptr(BTF_ID | ALLOC | (PERCPU if percpu else 0))
        r.bt, r.sub = t.name, value
        return r

    def _meta(self, tid: int) -> int | None:
        """btf_find_struct_meta: the struct's record (its id), None when it has none."""
        return tid if self._obj_fields(tid) else None

    def _call_type(self, key: tuple[int, int | None]) -> None:
        """check_kfunc_call: one bpf_obj_new (size, record) or bpf_obj_drop (record) call
        is rewritten for one type (insn_aux_data's obj_new_size, kptr_struct_meta), so
        paths reaching it with another (calls clang merged) are refused."""
        if self.call_types.setdefault(self.pc, key) != key:
            self.log.append("same call cannot be used with different types")
            self.log.append("use one call for each type: inline the static function that "
                            "holds the call,")
            raise Refuse("or mark the callee with __attribute__((nomerge))", errno.EINVAL)

    def _percpu_obj_type(self, tid: int) -> None:
        """check_kfunc_call for bpf_percpu_obj_new: the struct at most 512 bytes, without
        special fields (no btf_struct_meta), of scalars only (__btf_type_is_scalar_struct)."""
        assert self.btf is not None
        btf = self.btf
        t = btf.type_by_id(tid)
        if t.size_type > _PERCPU_OBJ_MAX:
            raise Refuse(f"bpf_percpu_obj_new type size ({t.size_type}) is greater than "
                         f"{_PERCPU_OBJ_MAX}", errno.EINVAL)
        try:
            special = bool(btf.special_fields(tid)) or any(
                btf.resolved(m.type).kind is BtfKind.STRUCT and
                btf.resolved(m.type).name in _OBJ_SPECIAL for m in t.members)
        except FieldError:
            special = True
        if special:
            raise Refuse("bpf_percpu_obj_new type ID argument must not contain special "
                         "fields", errno.EINVAL)

        def scalars(st: BtfType, depth: int) -> bool:
            for m in st.members:
                mt = btf.resolved(m.type)
                if mt.kind is BtfKind.STRUCT:
                    if depth >= 3:
                        self.log.append("max struct nesting depth exceeded")
                        return False
                    if not scalars(mt, depth + 1):
                        return False
                    continue
                if mt.kind is BtfKind.ARRAY and mt.array is not None:
                    if not mt.array.nelems:
                        return False
                    mt = btf.resolved(mt.array.type)
                if mt.kind not in (BtfKind.INT, BtfKind.ENUM):
                    return False
            return True

        if not scalars(t, 0):
            raise Refuse("bpf_percpu_obj_new type ID argument must be of a struct of scalars",
                         errno.EINVAL)

    def _kptrs(self, m: MapSpec) -> dict[int, int]:
        """The map value's referenced __kptr and __percpu_kptr fields: offset -> the
        program's struct id (:meth:`_percpu_kptrs` tells which are per-CPU)."""
        got = self.kptrs.get(m.name)
        if got is None:
            got = {}
            if self.btf is not None and m.value_type is not None:
                got = {**self.btf.kptr_fields(m.value_type),
                       **self.btf.kptr_fields(m.value_type, "percpu_kptr")}
            self.kptrs[m.name] = got
        return got

    def _unref_kptrs(self, m: MapSpec) -> dict[int, int]:
        """The map value's __kptr_untrusted fields (BPF_KPTR_UNREF): offset -> the
        program's struct id."""
        key = "unref:" + m.name
        got = self.kptrs.get(key)
        if got is None:
            got = {}
            if self.btf is not None and m.value_type is not None:
                got = self.btf.kptr_fields(m.value_type, "kptr_untrusted")
            self.kptrs[key] = got
        return got

    def _percpu_kptrs(self, m: MapSpec) -> dict[int, int]:
        """The map value's __percpu_kptr fields (BPF_KPTR_PERCPU): offset -> struct id."""
        key = "percpu:" + m.name
        got = self.kptrs.get(key)
        if got is None:
            got = {}
            if self.btf is not None and m.value_type is not None:
                got = self.btf.kptr_fields(m.value_type, "percpu_kptr")
            self.kptrs[key] = got
        return got

    def _kernel_kptr(self, tid: int) -> bool:
        """Whether a referenced kptr's struct ``tid`` is a kernel struct whose objects
        pyxdp does not model (:meth:`_kptr_struct` refuses to exchange them)."""
        assert self.btf is not None
        name = self.btf.types[tid].name
        return name not in KERNEL_KPTRS and bool(self._kernel_btf().find(name, BtfKind.STRUCT))

    def _kptr_struct(self, tid: int) -> str:
        """A kptr's struct: a program-local one (not in the kernel's BTF) is an object of
        bpf_obj_new; of the kernel's structs only KERNEL_KPTRS' are modelled."""
        assert self.btf is not None
        name = self.btf.types[tid].name
        if name not in KERNEL_KPTRS and self._kernel_btf().find(name, BtfKind.STRUCT):
            raise UnsupportedHelper(f"{self.spec.name}: a __kptr to kernel "
                                    f"struct {name} is not modelled by pyxdp", pc=self.pc)
        return name

    def _kptr_xchg(self, st: State, pc: int) -> int:
        """bpf_kptr_xchg(dst, ptr): dst a map value's referenced __kptr field
        (process_kptr_func), ptr NULL or an object of that field's struct, released;
        R0 the object the field held, acquired (PTR_TO_BTF_ID | MEM_ALLOC or NULL)."""
        regs = st.cur.regs
        dst = self._read(regs, 1)
        if dst.t != MAP_VALUE:
            raise Refuse(f"R1 type={type_str(dst.t)} expected=map_value, ptr_", errno.EACCES)
        m = dst.map
        assert m is not None
        if self.btf is None or m.value_type is None:
            raise Refuse(f"map '{m.kernel_name or m.name[:15]}' has to have BTF in order to use "
                         "bpf_kptr_xchg", errno.EINVAL)
        if not dst.const:
            raise Refuse("R1 doesn't have constant offset. kptr has to be at the constant "
                         "offset", errno.EINVAL)
        kptrs = self._kptrs(m)
        unref = self._unref_kptrs(m)
        if not kptrs and not unref:
            raise Refuse("R1 has no valid kptr", errno.EINVAL)
        off = dst.off + _s64(dst.tv)
        if off in unref:
            raise Refuse(f"off={off} kptr isn't referenced kptr", errno.EACCES)
        tid = kptrs.get(off)
        if tid is None:
            raise Refuse(f"off={off} doesn't point to kptr", errno.EACCES)
        kernel = self._kernel_kptr(tid)
        name = self.btf.types[tid].name if kernel else self._kptr_struct(tid)
        percpu = PERCPU if off in self._percpu_kptrs(m) else 0
        ptr = self._read(regs, 2)
        if not ptr.is_null():
            # check_reg_type: a kernel object's pointer may be trusted or RCU
            flags = ptr.t & ~0xFF
            if ptr.t & 0xFF != BTF_ID or flags & ~(ALLOC | PERCPU) and (
                    flags & (ALLOC | PERCPU) or flags & ~(TRUSTED | RCU)):
                raise Refuse(f"R2 type={type_str(ptr.t)} expected=ptr_, trusted_ptr_, "
                             "rcu_ptr_", errno.EACCES)
            if ptr.t & PERCPU != percpu:  # map_kptr_match_type: the flags, before the name
                raise Refuse(f"invalid kptr access, R2 type={type_str(ptr.t)} "
                             f"expected=ptr_{name}")
            # a program's object by its BTF id; a kernel object (of a kfunc) by its struct
            same = ptr.bt == name if kernel or name in KERNEL_KPTRS else ptr.sub == tid
            if not same or ptr.off:
                raise Refuse(f"invalid kptr access, R2 type={type_str(ptr.t)}{ptr.bt} "
                             f"expected=ptr_{name}")
            if not ptr.ref:
                raise Refuse("R2 must be referenced when passed to release function",
                             errno.EINVAL)
            if kernel:
                self._kptr_struct(tid)  # refuses to model the exchange
            in_rcu = not (self.syscall and self.spec.flags & BPF_F_SLEEPABLE) or st.rcu or \
                bool(st.locks)
            if in_rcu and ptr.t & ALLOC and ptr.t & PERCPU:
                # check_helper_call: inside an RCU read section a per-CPU object given
                # to the map stays readable, an RCU pointer no longer referenced
                ref = ptr.ref
                st.refs = [x for x in st.refs if x[0] != ref]
                for x in st.all_regs():
                    if x.ref == ref:
                        x.ref = 0
                        x.t = x.t & ~ALLOC | RCU
            else:
                self._release(st, ptr.ref)
        elif kernel:
            self._kptr_struct(tid)
        for r in range(6):
            regs[r].__init__()  # type: ignore[misc]
        r0 = regs[0]
        # a kernel object's pointer is no allocated object's (no MEM_ALLOC)
        r0.set_ptr(BTF_ID | (0 if name in KERNEL_KPTRS else ALLOC) | percpu | MAYBE_NULL)
        # a kernel object's struct by its name (its loads walk the kernel BTF's struct of
        # that name), as a kfunc's result names it: sub 0, not the program BTF's id
        r0.bt, r0.sub = name, 0 if name in KERNEL_KPTRS else tid
        r0.id = r0.ref = self._new_id()
        st.refs.append((r0.id, pc))
        return pc + 1

    def _percpu_ptr(self, st: State, fid: int, pc: int) -> int:
        """bpf_per_cpu_ptr(ptr, cpu), bpf_this_cpu_ptr(ptr): ptr a per-CPU object's pointer
        read from a map value (percpu_btf_ptr_types: MEM_PERCPU, not NULL, not the
        object bpf_percpu_obj_new gave); R0 one CPU's copy, an RCU object of the same
        struct (returns_cpu_specific_alloc_ptr: never NULL to the verifier)."""
        regs = st.cur.regs
        reg = self._read(regs, 1)
        if fid == BPF_FUNC_PER_CPU_PTR:
            self._read(regs, 2)
        if reg.t not in (BTF_ID | PERCPU, BTF_ID | PERCPU | RCU, BTF_ID | PERCPU | TRUSTED):
            raise Refuse(f"R1 type={type_str(reg.t)} expected=percpu_ptr_, percpu_rcu_ptr_, "
                         "percpu_trusted_ptr_")
        if reg.off or not reg.const or reg.tv:
            raise UnsupportedHelper(f"{self.spec.name}: pc {pc} passes a per-CPU object's "
                                    "pointer with an offset: not modelled by pyxdp", pc=pc)
        if not reg.sub:  # a kernel per-CPU variable (ld_imm64 of its BTF id)
            raise UnsupportedHelper(f"{self.spec.name}: pc {pc} passes kernel per-CPU "
                                    f"variable of type {reg.bt!r}: not modelled by pyxdp",
                                    pc=pc)
        bt, sub = reg.bt, reg.sub
        for r in range(6):
            regs[r].__init__()  # type: ignore[misc]
        regs[0].set_ptr(BTF_ID | ALLOC | RCU)
        regs[0].bt, regs[0].sub = bt, sub
        return pc + 1

    def _async_arg(self, n: int, i: int, reg: Reg, kind: KArg, meta: _KfuncMeta) -> None:
        """check_kfunc_args for a bpf_wq or bpf_task_work kfunc's workqueue (task work),
        map and callback arguments."""
        if kind in (KArg.WORKQUEUE, KArg.TASK_WORK):
            if reg.t != MAP_VALUE:
                raise Refuse(f"arg#{i} doesn't point to a map value", errno.EINVAL)
            meta.map = self._map_field(n, reg, "bpf_wq" if kind == KArg.WORKQUEUE
                                       else "bpf_task_work")
        elif kind == KArg.MAP:
            m = reg.map
            if m is None:
                raise Refuse(f"pointer in R{n} isn't map pointer", errno.EINVAL)
            # the field's own map (the message names the field's kind)
            if meta.map is not None and m is not meta.map:
                if "bpf_task_work" in self._fields(meta.map):
                    raise Refuse("bpf_task_work pointer in R2 map_uid=0 doesn't match map "
                                 "pointer in R3 map_uid=0", errno.EINVAL)
                raise Refuse("workqueue pointer in R1 map_uid=0 doesn't match map pointer "
                             "in R2 map_uid=0", errno.EINVAL)
            if reg.t != MAP_PTR:  # is_trusted_reg: a map pointer, nothing derived from one
                raise Refuse(f"R{n} must be referenced or trusted", errno.EINVAL)
            meta.map = m
        else:
            if reg.t != FUNC:
                raise Refuse(f"arg{i} expected pointer to func", errno.EINVAL)
            meta.func = reg.sub

    def _kfunc_mem_size(self, st: State, regs: list[Reg], n: int) -> None:
        """check_kfunc_mem_size_reg: a size (zero allowed) and the memory before it."""
        reg = regs[n]
        if reg.t != SCALAR:
            raise Refuse(f"R{n} is not a scalar", errno.EINVAL)
        if reg.smin < 0:
            raise Refuse(f"R{n} min value is negative, either use unsigned or 'var &= const'")
        if reg.umax >= BPF_MAX_VAR_SIZ:
            raise Refuse(f"R{n} unbounded memory access, use 'var &= const' or "
                         "'if (var < const)'")
        mem = regs[n - 1]
        if mem.t & MAYBE_NULL:  # checked as if not NULL
            mem = mem.copy()
            mem.t &= ~MAYBE_NULL
        if mem.is_null() and reg.umax == 0:
            return
        self._helper_mem(st, n - 1, mem, reg.umax, write=False, zero_ok=True)
        self._helper_mem(st, n - 1, mem, reg.umax, write=True, zero_ok=True)
        self._mark_precise(st, [n])

    def _dynptr_arg(self, st: State, regs: list[Reg], n: int, i: int, uninit: bool,
                    name: str, meta: _KfuncMeta, kind: int | None = None,
                    helper: bool = False) -> None:
        """process_dynptr_func: a dynptr (two stack slots) made or used, or used through a
        global function's dynptr argument (CONST_PTR_TO_DYNPTR: read-only, always valid).
        ``kind``: the dynptr type made (uninit) or expected; a ringbuf one holds a
        reference; ``helper``: a helper's argument (not a kfunc's)."""
        reg = regs[n]
        if reg.t == DYNPTR:
            self._check_ptr_off(n, reg)  # check_func_arg_reg_off
            if uninit and helper:  # is_dynptr_reg_valid_uninit
                raise Refuse("Dynptr has to be an uninitialized dynptr", errno.EINVAL)
            if uninit:  # a kfunc's argument is MEM_RDONLY too: Linux 6.18 logs this (and
                # WARNs: a kernel splat) as its own bug
                raise Refuse("verifier bug: misconfigured dynptr helper type flags",
                             errno.EFAULT)
            if kind is not None and reg.sub != kind:
                raise Refuse(f"Expected a dynptr of type {_DYNPTR_TYPE_STR[kind]} as arg "
                             f"#{i}", errno.EINVAL)
            meta.dynptr_id, meta.dynptr_kind = reg.id, reg.sub
            return
        if reg.t != STACK:
            raise Refuse(f"arg#{i} expected pointer to stack or const struct bpf_dynptr",
                         errno.EINVAL)
        frame = st.frames[reg.frame]
        spi = self._dynptr_spi(reg)
        if uninit:
            if spi is None:
                raise Refuse("Dynptr has to be an uninitialized dynptr", errno.EINVAL)
            for off in (0, 8):  # check_mem_access: two BPF_DW writes
                self._mem(st, n, reg, off, 8, write=True, value=None)
            spi = self._dynptr_spi(reg)
            assert spi is not None and spi >= 1
            if kind is None:
                kind = _DYNPTR_XDP if name == "bpf_dynptr_from_xdp" else meta.dynptr_kind
            did = self._new_id()
            ref = meta.dynptr_ref  # a clone's: its parent's reference
            if kind == _DYNPTR_RINGBUF and not ref:  # acquire_reference
                ref = self._new_id()
                st.refs.append((ref, self.pc))
            for s, first in ((spi, 1), (spi - 1, 0)):
                d = Reg()
                d.t, d.off, d.id, d.sub, d.ref = DYNPTR, first, did, kind, ref
                d.set_var_zero()
                frame.set_slot(s, (bytes([S_DYNPTR] * 8), d))
            return
        d1: Reg | None = None
        if spi is not None and 1 <= spi < len(frame.stack):
            self._stack_read(st, reg.frame, spi)
            self._stack_read(st, reg.frame, spi - 1)
            t1, d1 = frame.slot(spi)
            t2, _ = frame.slot(spi - 1)
            if not (t1 == bytes([S_DYNPTR] * 8) and t2 == t1 and d1 is not None and d1.off):
                d1 = None
        if d1 is None:
            raise Refuse(f"Expected an initialized dynptr as arg #{i}", errno.EINVAL)
        if kind is not None and d1.sub != kind:
            raise Refuse(f"Expected a dynptr of type {_DYNPTR_TYPE_STR[kind]} as arg #{i}",
                         errno.EINVAL)
        meta.dynptr_id, meta.dynptr_kind, meta.dynptr_ref = d1.id, d1.sub, d1.ref

    def _iter_arg(self, st: State, regs: list[Reg], n: int, i: int, p: KParam,
                  proto: KfuncProto, meta: _KfuncMeta, name: str) -> None:
        """process_iter_arg: ``struct bpf_iter_<kind>`` in stack slots, made by the
        ``_new`` kfunc (an acquired reference), used by ``_next``, ended by ``_destroy``."""
        reg = regs[n]
        if p.struct == CSS_TASK_ITER and proto.flags & KF_ITER_NEW:
            raise Refuse("css_task_iter is only allowed in bpf_lsm, bpf_iter and sleepable "
                         "progs", errno.EINVAL)
        if reg.t != STACK:
            raise Refuse(f"arg#{i} expected pointer to an iterator on stack", errno.EINVAL)
        frame = st.frames[reg.frame]
        nslots = p.size // 8
        spi = self._iter_spi(reg, nslots)
        if proto.flags & KF_ITER_NEW:
            if spi is None or any(S_ITER in frame.slot(s)[0]
                                  for s in range(spi - nslots + 1, spi + 1)):
                raise Refuse(f"expected uninitialized iter_{p.struct} as arg #{i}",
                             errno.EINVAL)
            for off in range(0, p.size, 8):  # check_mem_access: a BPF_DW write per slot
                self._mem(st, n, reg, off, 8, write=True, value=None)
            spi = self._iter_spi(reg, nslots)
            assert spi is not None
            ref = self._new_id()
            st.refs.append((ref, self.pc))
            for k, s in enumerate(range(spi, spi - nslots, -1)):
                new = Reg()
                new.t = ITER | (RCU if proto.flags & KF_RCU_PROTECTED else 0)
                new.bt, new.sub = p.struct, ITER_ACTIVE
                new.ref = ref if k == 0 else 0  # only the first slot holds the reference
                new.set_var_zero()
                frame.set_slot(s, (bytes([S_ITER] * 8), new))
            return
        it = frame.slot(spi)[1] if spi is not None else None
        if spi is None or it is None or it.t & 0xFF != ITER or it.bt != p.struct or \
                not it.ref or any(frame.slot(s)[0] != bytes([S_ITER] * 8)
                                  for s in range(spi - nslots + 1, spi + 1)):
            raise Refuse(f"expected an initialized iter_{p.struct} as arg #{i}", errno.EINVAL)
        if it.t & UNTRUSTED:  # is_iter_reg_valid_init: made in an RCU read section now over
            raise Refuse(f"expected an RCU CS when using {name}", errno.EPROTO)
        for s in range(spi - nslots + 1, spi + 1):  # mark_iter_read
            self._stack_read(st, reg.frame, s)
        if proto.flags & KF_ITER_DESTROY:
            for s in range(spi - nslots + 1, spi + 1):  # unmark_stack_slots_iter
                frame.set_slot(s, _EMPTY)
                self.stack_live.write(reg.frame, s)
            self._release(st, it.ref)  # and the elements it gave (release_reference)
            return
        meta.iter = (reg.frame, spi)

    def _iter_spi(self, reg: Reg, nslots: int, kind: str = "iter") -> int | None:
        """stack_slot_obj_get_spi (iter_get_spi, irq_flag_get_spi): the first slot's
        index; None for an error Linux logs."""
        if not reg.const:
            self.log.append(f"{kind} has to be at a constant offset")
            return None
        off = reg.off + _s64(reg.tv)
        spi = (-off - 1) // 8
        if off % 8 or spi + 1 < nslots:
            self.log.append(f"cannot pass in {kind} at an offset={off}")
            return None
        return spi

    def _irq_flag(self, st: State, n: int, i: int, save: bool, cls: int) -> None:
        """process_irq_flag: bpf_local_irq_save (and bpf_res_spin_lock_irqsave) marks an
        8-byte stack slot STACK_IRQ_FLAG holding a new IRQ reference, the active one, and
        the class of kfunc that saved it; the restore of the same class takes the slot of
        the active reference only (IRQ states restore last saved first) and frees it."""
        reg = st.cur.regs[n]
        frame = st.frames[reg.frame]
        spi = self._iter_spi(reg, 1, "irq_flag")
        if save:
            if spi is None or S_IRQ in frame.slot(spi)[0]:  # is_irq_flag_reg_valid_uninit
                raise Refuse(f"expected uninitialized irq flag as arg#{i}", errno.EINVAL)
            self._mem(st, n, reg, 0, 8, write=True, value=None)
            ref = self._new_id()
            st.irqs.append((ref, self.pc))
            flag = Reg()
            flag.set_ptr(STACK)  # Linux has no type of its own for it
            flag.ref = ref
            flag.sub = cls  # irq.kfunc_class
            frame.set_slot(spi, (_IRQ_SLOT, flag))
            return
        f = frame.slot(spi)[1] if spi is not None else None
        if spi is None or f is None or not f.ref or frame.slot(spi)[0] != _IRQ_SLOT:
            raise Refuse(f"expected an initialized irq flag as arg#{i}", errno.EINVAL)
        self._stack_read(st, reg.frame, spi)  # mark_irq_flag_read
        if f.sub != cls:  # unmark_stack_slot_irq_flag
            kinds = {IRQ_NATIVE_KFUNC: "native", IRQ_LOCK_KFUNC: "lock"}
            raise Refuse(f"irq flag acquired by {kinds[f.sub]} kfuncs cannot be restored "
                         f"with {kinds[cls]} kfuncs", errno.EINVAL)
        active, at = st.irqs[-1] if st.irqs else (0, 0)
        if f.ref != active:  # release_irq_state
            raise Refuse(f"cannot restore irq state out of order, expected id={active} "
                         f"acquired at insn_idx={at}")
        st.irqs.pop()
        frame.set_slot(spi, _EMPTY)
        self.stack_live.write(reg.frame, spi)

    def _iter_next(self, st: State, pc: int, where: tuple[int, int],
                   stack: list[tuple[State, int]]) -> None:
        """process_iter_next_call: an active iterator may yield once more (that state is
        queued, one iteration deeper, R0 not NULL) or be drained (R0 NULL, the current
        path). Scalars an iteration changed and nothing needs precisely are widened
        against the previous iteration's state, so that the loop converges."""
        fno, spi = where
        it = st.frames[fno].slot(spi)[1]
        assert it is not None
        if it.sub == ITER_ACTIVE:
            q = st.copy()
            qit = q.frames[fno].spill_w(spi)
            assert qit is not None
            qit.rng += 1
            q.cur.regs[0].t &= ~MAYBE_NULL
            prev = self._prev_entry(st, pc)
            if prev is not None:
                self._widen(prev, q)
            self._push(q, pc + 1, stack, errno.ENOMEM)
        it = st.frames[fno].spill_w(spi)
        assert it is not None
        it.sub = ITER_DRAINED
        st.cur.regs[0].set_known(0)

    def _may_goto(self, st: State, i: Instruction, pc: int,
                  stack: list[tuple[State, int]]) -> int:
        """check_cond_jmp_op for BPF_JCOND: the jump is the path walked now; the fall
        through (one may_goto deeper, imprecise scalars widened) is queued."""
        if i.src or i.dst or i.imm:
            raise Refuse(f"invalid may_goto imm {i.imm}", errno.EINVAL)
        prev = self._prev_entry(st, pc)
        q = st.copy()
        q.may_goto += 1
        if prev is not None:
            self._widen(prev, q)
        self._push(q, pc + 1, stack, errno.ENOMEM)
        return pc + 1 + i.off

    @staticmethod
    def _prev_entry(st: State, pc: int, here: bool = False) -> State | None:
        """find_prev_entry: the state kept at ``pc`` on an earlier iteration of this path
        (past the one kept at this very visit, unless ``here``)."""
        if st.parent is None:
            return None
        sites = [f.callsite for f in st.frames]
        p = st.parent if here else st.parent.parent
        while p is not None:
            if p.pc == pc and [f.callsite for f in p.frames] == sites:
                return p
            p = p.parent
        return None

    @classmethod
    def _arg_reg_off(cls, n: int, reg: Reg) -> None:
        """check_func_arg_reg_off: pointers to memory may be passed with any offset, a
        PTR_TO_BTF_ID with a fixed one, the others only unmodified."""
        if reg.t & ~RDONLY & ~RINGBUF & ~PKT_SLICE in (STACK, PKT, PKT_META, MAP_KEY, MAP_VALUE,
                                                      MEM, SCALAR):
            return
        if reg.t & ~TRUSTED == BTF_ID:
            if reg.off < 0 or not reg.const or reg.tv:
                cls._check_ptr_off(n, reg)
            return
        cls._check_ptr_off(n, reg)

    @staticmethod
    def _check_ptr_off(n: int, reg: Reg) -> None:
        """__check_ptr_off_reg: a pointer passed on unmodified."""
        ts = type_str(reg.t)
        if reg.off < 0:
            raise Refuse(f"negative offset {ts} ptr R{n} off={reg.off} disallowed")
        if reg.off:
            raise Refuse(f"dereference of modified {ts} ptr R{n} off={reg.off} disallowed")
        if not reg.const or reg.tv:
            raise Refuse(f"variable {ts} access var_off={_tn(reg)} disallowed")

    def _dynptr_spi(self, reg: Reg) -> int | None:
        """dynptr_get_spi: the first slot's index; None for an error Linux logs."""
        if not reg.const:
            self.log.append("dynptr has to be at a constant offset")
            return None
        off = reg.off + _s64(reg.tv)
        spi = (-off - 1) // 8
        if off % 8 or spi + 1 < 2:
            self.log.append(f"cannot pass in dynptr at an offset={off}")
            return None
        return spi

    def _unmark_dynptr(self, st: State, ref: int) -> None:
        """unmark_stack_slots_dynptr of a ringbuf dynptr: it and every clone (same
        ref_obj_id) become invalid stack, its slices unknown scalars."""
        for frame in st.frames:
            for spi, (types, d) in enumerate(frame.stack):
                if d is not None and types[0] == S_DYNPTR and d.ref == ref and d.off:
                    frame.set_slot(spi, _EMPTY)
                    frame.set_slot(spi - 1, _EMPTY)
        self._release(st, ref)

    def _release(self, st: State, ref: int) -> None:
        st.refs = [x for x in st.refs if x[0] != ref]
        for r in st.all_regs():
            if r.ref == ref:
                r.set_unknown()

    def _loop_inline_state(self, st: State, pc: int, func: int) -> None:
        """update_loop_inline_state: a bpf_loop call is inlined while every visit passes
        the same callback and flags known zero; the zero is then relied upon (precise)."""
        fit = self.loop_inline.get(pc)
        if fit is not None and not fit[0]:
            return
        r4 = st.cur.regs[4]
        zero = r4.t == SCALAR and r4.const and r4.tv == 0
        if zero:
            self._mark_precise(st, [4])
        self.loop_inline[pc] = (zero and (fit is None or fit[1] == func), func)

    def _push_callback(self, st: State, fid: int, target: int, meta: _CallMeta,
                       pc: int, stack: list[tuple[State, int]]) -> None:
        """push_callback_call for bpf_loop, bpf_for_each_map_elem, bpf_find_vma and
        bpf_user_ringbuf_drain."""
        def args(f: Frame, regs: list[Reg]) -> None:
            if fid == 181:  # bpf_loop(nr, cb, ctx, flags): cb(index, ctx)
                f.regs[1].set_unknown()  # set_loop_callback_state: any scalar, unbounded
                f.regs[2].assign(regs[3])
            elif fid == 180:  # bpf_find_vma(task, addr, cb, ctx, flags): cb(task, vma, ctx)
                f.regs[1].assign(regs[1])
                f.regs[2].set_ptr(BTF_ID)
                f.regs[2].bt = "vm_area_struct"
                f.regs[3].assign(regs[4])
            elif fid == 209:  # bpf_user_ringbuf_drain(map, cb, ctx, flags): cb(dynptr, ctx)
                f.regs[1].set_ptr(DYNPTR)
                f.regs[1].sub = _DYNPTR_LOCAL
                f.regs[2].assign(regs[3])
            else:  # bpf_for_each_map_elem(map, cb, ctx, flags): cb(map, key, value, ctx)
                m = meta.map
                assert m is not None
                f.regs[1].set_ptr(MAP_PTR)
                f.regs[1].map = m
                f.regs[2].set_ptr(MAP_KEY)
                f.regs[2].map = m
                f.regs[2].msize = m.key_size
                f.regs[3].set_ptr(MAP_VALUE)
                f.regs[3].map = m
                f.regs[4].assign(regs[3])
        if fid == BPF_FUNC_FOR_EACH_MAP_ELEM and meta.map is not None and \
                meta.map.type not in _FOR_EACH_MAPS:
            # set_map_elem_callback_state: the map's ops have no for-each callback
            raise Refuse("callback function not allowed for map", ENOTSUPP)
        self._enter_callback(st, fid, target, pc, stack, args)

    def _enter_callback(self, st: State, kind: int, target: int, pc: int,
                        stack: list[tuple[State, int]],
                        args: Callable[[Frame, list[Reg]], None]) -> None:
        """push_callback_call of a sync callback: the callback at ``target`` runs on a
        state of its own (its frame's arguments set by ``args`` from the caller's
        registers), back to the call at ``pc`` after, which calls it again until the
        states converge; ``kind`` is the frame's ``callback``."""
        self.sync_cbs.add(target)
        if len(st.frames) >= MAX_CALL_FRAMES:
            raise Refuse(f"the call stack of {len(st.frames) + 1} frames is too deep",
                         errno.E2BIG)
        cb = st.copy()
        caller = cb.cur
        f = Frame(len(cb.frames), pc, target)
        f.callback = kind
        args(f, caller.regs)
        cb.frames.append(f)
        cb.cb_unroll += 1
        caller.cb_depth += 1
        st.cur.cb_depth = 0
        self._push(cb, target, stack, errno.ENOMEM)

    def _arg(self, st: State, regs: list[Reg], n: int, arg: Arg, args: tuple[Arg, ...],
             meta: _CallMeta, fid: int) -> None:
        reg = self._read(regs, n)
        if arg == Arg.ANYTHING:
            return
        if reg.t in (PKT, PKT_META) and fid not in PKT_ACCESS:  # may_access_direct_pkt_data
            raise Refuse("helper access to the packet is not allowed")
        if arg in _MAP_VALUE_ARGS and meta.map is not None and \
                meta.map.type in (MT.BPF_MAP_TYPE_SOCKMAP, MT.BPF_MAP_TYPE_SOCKHASH):
            # resolve_map_arg_type: a socket map's value is a socket
            if arg != Arg.MAP_VALUE:
                raise Refuse("invalid arg_type for sockmap/sockhash", errno.EINVAL)
            arg = Arg.SOCK_COMMON
        elif arg == Arg.UNINIT_MAP_VALUE and fid == 89 and meta.map is not None and \
                meta.map.type == MT.BPF_MAP_TYPE_BLOOM_FILTER:
            # resolve_map_arg_type: a bloom filter's peek tests the value given, it writes
            # nothing (the stack keeps what it holds)
            arg = Arg.MAP_VALUE
        expect = self._arg_types(arg)
        may_null = arg in _NULLABLE_ARGS
        if may_null and reg.is_null():
            return
        t = reg.t & ~PKT_SLICE
        if arg in (Arg.MEM_RDONLY, Arg.MEM_RDONLY_OR_NULL, Arg.FIXED_MEM_RDONLY):
            t &= ~RDONLY  # check_reg_type: a read-only argument takes read-only memory
        shown = t
        if may_null:  # and a nullable one a pointer that may be NULL
            t &= ~MAYBE_NULL
        if t not in expect[0]:
            names = ", ".join(type_str(x) for x in expect[0]) if expect[1] is None \
                else expect[1]
            raise Refuse(f"R{n} type={type_str(shown)} expected={names}")
        if arg == Arg.CONST_MAP_PTR:
            m = reg.map
            assert m is not None
            if fid == 12 and m.type != MT.BPF_MAP_TYPE_PROG_ARRAY:
                # Linux prints this one without a newline: the statistics line follows.
                raise Refuse("expected prog array map for tail call", errno.EINVAL, glued=True)
            if meta.map is not None and meta.map is not m:  # bpf_timer_init's two maps
                raise Refuse("timer pointer in R1 map_uid=0 doesn't match map pointer in R2 "
                             "map_uid=0", errno.EINVAL)
            meta.bad_map = not func_maps(fid, m.type)
            meta.map = m
            return
        if t != SCALAR and t != FUNC and reg.off and t == CTX:
            raise Refuse(f"dereference of modified ctx ptr R{n} off={reg.off} disallowed")
        if arg == Arg.TIMER:
            meta.map = self._map_field(n, reg, "bpf_timer")
            return
        if arg in (Arg.MAP_KEY, Arg.MAP_VALUE, Arg.UNINIT_MAP_VALUE):
            m = meta.map
            if m is None:
                what = "key" if arg == Arg.MAP_KEY else "value"
                raise Refuse(f"invalid map_ptr to access map->{what}")
            size = m.key_size if arg == Arg.MAP_KEY else m.value_size
            # can_elide_value_nullness: only an array's key is looked at (and needed
            # precise) for being a constant
            if arg == Arg.MAP_KEY and m.type in (MT.BPF_MAP_TYPE_ARRAY,
                                                 MT.BPF_MAP_TYPE_PERCPU_ARRAY):
                key = self._const_key(st, reg, size)
                meta.const_key = None if key is None else key[0]
                if key is not None and key[1] is not None:  # a spilled constant, not zeros
                    self._mark_precise(st, slots=[(reg.frame, key[1])])
            self._helper_mem(st, n, reg, size, write=arg == Arg.UNINIT_MAP_VALUE)
            return
        if arg in (Arg.CONST_SIZE, Arg.CONST_SIZE_OR_ZERO):
            zero_ok = arg == Arg.CONST_SIZE_OR_ZERO
            if reg.smin < 0:
                raise Refuse(f"R{n} min value is negative, either use unsigned or "
                             "'var &= const'")
            if reg.umin == 0 and not zero_ok:
                raise Refuse(f"R{n} invalid zero-sized read: u64=[{reg.umin},{reg.umax}]")
            if reg.umax >= BPF_MAX_VAR_SIZ:
                raise Refuse(f"R{n} unbounded memory access, use 'var &= const' or "
                             "'if (var < const)'")
            mem = regs[n - 1]
            write = args[n - 2] in (Arg.MEM, Arg.UNINIT_MEM, Arg.MEM_OR_NULL)
            if mem.is_null() and zero_ok and reg.umax == 0:
                return
            if mem.t & MAYBE_NULL:  # a nullable argument's memory, checked as if not NULL
                mem = mem.copy()
                mem.t &= ~MAYBE_NULL
            self._helper_mem(st, n - 1, mem, reg.umax, write=write, zero_ok=zero_ok)
            self._mark_precise(st, [n])
            return
        if arg == Arg.CONST_ALLOC_SIZE_OR_ZERO:
            if not reg.const:
                raise Refuse(f"R{n} is not a known constant'")
            meta.mem_size = reg.tv
            self._mark_precise(st, [n])
            return
        if arg in (Arg.SOCK_COMMON, Arg.SOCK_RELEASE):
            self._arg_reg_off(n, reg)
            if arg == Arg.SOCK_RELEASE:
                meta.ref = _released_ref(n, reg)
            meta.ref_obj = reg.ref
            return
        if arg == Arg.FIXED_MEM_RDONLY:
            self._helper_mem(st, n, reg, PROTOS[fid].sizes[n - 1], write=False)
            return
        if arg == Arg.TASK_BTF_ID:  # check_reg_type's struct match, then the fixed offset
            if reg.bt != "task_struct":
                raise Refuse(f"R{n} is of type {reg.bt} but task_struct is expected")
            return
        if arg == Arg.RINGBUF_MEM_RELEASE:
            if reg.off or not reg.const or reg.tv:
                raise Refuse(f"R{n} must have zero offset when passed to release func or "
                             "trusted arg to kfunc", errno.EINVAL)
            meta.ref = _released_ref(n, reg)
            return
        if arg == Arg.FUNC:
            meta.func = reg.sub
            return
        if arg == Arg.FIXED_U32_UNINIT:
            self._helper_mem(st, n, reg, 4, write=True)
            return
        if arg == Arg.FIXED_S64_OUT:  # the access, then its alignment (always strict)
            self._helper_mem(st, n, reg, 8, write=True)
            self._check_alignment(reg, 0, 8)
            return
        if arg == Arg.CONST_STR:
            meta.fmt = self._const_str(n, reg)
            return
        if arg == Arg.SPIN_LOCK:
            if st.cur.callback == _RBTREE_CB:  # in_rbtree_lock_required_cb
                raise Refuse("can't spin_{lock,unlock} in rbtree cb", errno.EACCES)
            self._spin_lock(st, n, reg, _PROCESS_SPIN_LOCK if fid == 93 else 0)
            return
        if arg in (Arg.DYNPTR, Arg.DYNPTR_RINGBUF_UNINIT, Arg.DYNPTR_RINGBUF_RELEASE,
                   Arg.DYNPTR_LOCAL_UNINIT):
            km = _KfuncMeta()
            if arg == Arg.DYNPTR_RINGBUF_RELEASE:  # check_func_arg's OBJ_RELEASE
                if reg.t != STACK:
                    raise Refuse("cannot release unowned const bpf_dynptr", errno.EINVAL)
                at = self._dynptr_spi(reg)
                frame = st.frames[reg.frame]
                d = frame.slot(at)[1] if at is not None and at < len(frame.stack) else None
                if d is None or not d.ref:
                    raise Refuse(f"arg {n} is an unacquired reference", errno.EINVAL)
            # process_dynptr_func, numbered from 0 as Linux logs it
            self._dynptr_arg(st, regs, n, n - 1,
                             arg in (Arg.DYNPTR_RINGBUF_UNINIT, Arg.DYNPTR_LOCAL_UNINIT),
                             _helper_name(fid), km,
                             None if arg == Arg.DYNPTR else
                             _DYNPTR_LOCAL if arg == Arg.DYNPTR_LOCAL_UNINIT else _DYNPTR_RINGBUF,
                             helper=True)
            meta.dynptr_id, meta.dynptr_ref = km.dynptr_id, km.dynptr_ref
            if arg == Arg.DYNPTR_RINGBUF_RELEASE:
                meta.dynptr_release = km.dynptr_ref
            return

    @staticmethod
    def _const_str(n: int, reg: Reg) -> bytes:
        """check_reg_const_str: a constant offset into read-only array data (frozen: its
        bytes are known) where a NUL ends the string before the value does."""
        m = reg.map
        if m is None or not _rdonly(m):
            raise Refuse(f"R{n} does not point to a readonly map'")
        if reg.tm:
            raise Refuse(f"R{n} is not a constant address'")
        if m.type != MT.BPF_MAP_TYPE_ARRAY:  # map_direct_value_addr
            raise Refuse("no direct value access support for this map type")
        at = reg.off + reg.tv
        value = m.contents[0][1] if m.contents and isinstance(m.contents[0][1], bytes) \
            else b""
        text = value.ljust(m.value_size, b"\0")[at:m.value_size]
        if b"\0" not in text:
            raise Refuse("string is not zero-terminated", errno.EINVAL)
        return text

    def _fields(self, m: MapSpec) -> dict[str, int]:
        """btf_parse_fields: the special fields of the map's value (``bpf_spin_lock``,
        ``bpf_res_spin_lock``, ``bpf_timer``, ``bpf_wq``) by their struct's name, at
        their offsets (:meth:`_field_list`, the last of each)."""
        got = self.fields.get(m.name)
        if got is None:  # btf_parse_fields keeps the last of each (spin_lock_off...)
            got = self.fields[m.name] = dict(self._field_list(m))
        return got

    def _field_list(self, m: MapSpec) -> list[tuple[str, int]]:
        """btf_parse_fields: the map value's special fields (bpf_spin_lock,
        bpf_res_spin_lock, bpf_timer...) as (struct name, offset), in nested structs
        too (a value whose record Linux refuses has none: map_check_btf keeps the map,
        its record an error, which holds no field)."""
        got = self.field_lists.get(m.name)
        if got is not None:
            return got
        found: list[tuple[str, int]] = []
        if self.btf is not None and m.value_type is not None:
            try:
                found = self.btf.special_fields(m.value_type)
            except FieldError:
                found = []
        self.field_lists[m.name] = found
        return found

    def _field_overlap(self, m: MapSpec, reg: Reg, off: int, size: int, *,
                       direct: bool = False) -> int | None:
        """check_map_access: no load, store or helper access may touch any byte of a
        special field (its smallest to largest offset against the field's bytes) but a
        load or store (``direct``) of a whole __kptr field at a constant offset, whose
        offset is returned (None: no kptr touched)."""
        if m.value_type is None:
            return None
        kptr = None
        for name, at in self._field_list(m):
            if not (reg.smin + off < at + SPECIAL_FIELDS[name].size and
                    at < reg.umax + off + size):
                continue
            if name not in ("kptr", "percpu_kptr", "kptr_untrusted"):
                raise Refuse(f"{name} cannot be accessed directly by load/store")
            if not direct:
                raise Refuse("kptr cannot be accessed indirectly by helper")
            if not reg.const:
                raise Refuse("kptr access cannot have variable offset")
            if at != off + reg.tv:
                raise Refuse(f"kptr access misaligned expected={at} off={off + reg.tv}")
            if size != 8:
                raise Refuse("kptr access size must be BPF_DW")
            kptr = at
        return kptr

    def _lock_off(self, m: MapSpec) -> int | None:
        """Where the map value holds its struct bpf_spin_lock or bpf_res_spin_lock
        (reg_may_point_to_spin_lock)."""
        f = self._fields(m)
        return f.get("bpf_spin_lock", f.get("bpf_res_spin_lock"))

    def _map_field(self, n: int, reg: Reg, field: str) -> MapSpec:
        """check_map_field_pointer: R``n`` points at the map value's own ``struct field``,
        at a constant offset; the map."""
        m = reg.map
        assert m is not None
        if not reg.const:
            raise Refuse(f"R{n} doesn't have constant offset. {field} has to be at the "
                         "constant offset", errno.EINVAL)
        name = m.kernel_name or m.name[:15]
        if self.btf is None or m.value_type is None:
            raise Refuse(f"map '{name}' has to have BTF in order to use {field}",
                         errno.EINVAL)
        at = self._fields(m).get(field)
        if at is None:
            raise Refuse(f"map '{name}' has no valid {field}", errno.EINVAL)
        off = _s64(reg.tv) + reg.off
        if off != at:
            raise Refuse(f"off {off} doesn't point to 'struct {field}' that is at {at}",
                         errno.EINVAL)
        return m

    def _push_async(self, st: State, target: int, m: MapSpec,
                    stack: list[tuple[State, int]], kind: int = _ASYNC_CB) -> None:
        """push_async_cb: a timer's or work item's callback runs on its own (frame 0),
        from the map, the key and the value of the field; it is verified after this
        path (set_timer_callback_state)."""
        self.async_cbs.add(target)
        cb = State()
        f = Frame(0, -1, target)  # BPF_MAIN_FUNC: callbacks set anywhere compare alike
        f.callback = kind
        f.regs[1].set_ptr(MAP_PTR)
        f.regs[2].set_ptr(MAP_KEY)
        f.regs[2].msize = m.key_size
        f.regs[3].set_ptr(MAP_VALUE)
        for r in (1, 2, 3):
            f.regs[r].map = m
        cb.frames.append(f)
        # a state of its own: no checkpoint of this path is its parent (Linux starts it
        # fresh), so precision marks stop at its start and this path's kept states do
        # not wait for it
        self._push(cb, target, stack, errno.EFAULT, " for async cb")

    def _spin_lock(self, st: State, n: int, reg: Reg, flags: int) -> None:
        """process_spin_lock: the map value's bpf_spin_lock (or, with _PROCESS_RES_LOCK,
        its bpf_res_spin_lock), at its offset, taken (_PROCESS_SPIN_LOCK) or released.
        Any number of locks may be held, but a second bpf_spin_lock (the helper is a
        call, refused while a lock is held) or a res lock this path already holds; they
        are released last taken first."""
        res = bool(flags & _PROCESS_RES_LOCK)
        what = "bpf_res_spin" if res else "bpf_spin"
        owner = self._obj_lock(n, reg) if reg.t == BTF_ID | ALLOC else \
            self._map_field(n, reg, f"{what}_lock").name
        kind = (REF_TYPE_RES_LOCK_IRQ if flags & _PROCESS_LOCK_IRQ else REF_TYPE_RES_LOCK) \
            if res else REF_TYPE_LOCK
        if flags & _PROCESS_SPIN_LOCK:
            if res and any(t & _RES_LOCKS and (mp, i) == (owner, reg.id)
                           for t, mp, i in st.locks):
                raise Refuse("Acquiring the same lock again, AA deadlock detected",
                             errno.EINVAL)
            st.locks += ((kind, owner, reg.id),)
            return
        if not st.locks:
            raise Refuse(f"{what}_unlock without taking a lock", errno.EINVAL)
        held = (kind, owner, reg.id)
        if held not in st.locks:
            raise Refuse(f"{what}_unlock of different lock", errno.EINVAL)
        if st.locks[-1][1:] != held[1:]:  # active_lock_id, active_lock_ptr
            raise Refuse(f"{what}_unlock cannot be out of order", errno.EINVAL)
        k = st.locks.index(held)
        st.locks = st.locks[:k] + st.locks[k + 1:]
        self._invalidate_non_owning(st)

    def _obj_lock(self, n: int, reg: Reg) -> str:
        """process_spin_lock of an owned allocated object: its struct's own
        bpf_spin_lock, at its offset; the owner its lock state names."""
        if not reg.const:
            raise Refuse(f"R{n} doesn't have constant offset. bpf_spin_lock has to be at "
                         "the constant offset", errno.EINVAL)
        at = dict(self._obj_fields(reg.sub)).get("bpf_spin_lock")
        if at is None:
            raise Refuse("local 'kptr' has no valid bpf_spin_lock", errno.EINVAL)
        off = _s64(reg.tv) + reg.off
        if off != at:
            raise Refuse(f"off {off} doesn't point to 'struct bpf_spin_lock' that is at {at}",
                         errno.EINVAL)
        return _OBJ_LOCK

    def _lock_failed(self, st: State, pc: int, stack: list[tuple[State, int]]) -> None:
        """check_kfunc_call for bpf_res_spin_lock(_irqsave): the path where the lock is
        not taken goes on after the call with r0-r5 unset and r0 an errno in
        [-MAX_ERRNO, -1] (the lock and IRQ state untouched: its arguments are not even
        checked on it)."""
        q = st.copy()
        regs = q.cur.regs
        for r in range(6):
            regs[r].__init__()  # type: ignore[misc]
        r0 = regs[0]
        r0.set_unknown()
        r0.s32min, r0.s32max = -MAX_ERRNO, -1
        r0.smin, r0.smax = -MAX_ERRNO, -1
        r0.sync()
        if len(stack) >= BPF_COMPLEXITY_LIMIT_JMP_SEQ:  # (push_stack's line comes first)
            raise Refuse("failed to push state for failed lock acquisition", errno.ENOMEM)
        self._push(q, pc + 1, stack)

    @staticmethod
    def _const_key(st: State, reg: Reg, size: int) -> tuple[int, int | None] | None:
        """get_constant_map_key: a key the stack holds as zeros or as a known spill, with
        the spill's slot (which the key's value then needs precise; zeros need nothing)."""
        if reg.t != STACK or not reg.const:
            return None
        a = reg.off + _s64(reg.tv)
        if a >= 0 or a < -MAX_BPF_STACK:
            return None
        spi = (-a - 1) // 8
        k = a + 8 * (spi + 1)
        types, spill = st.frames[reg.frame].slot(spi)
        zeros = 0
        while k + zeros < 8 and types[k + zeros] == S_ZERO:
            zeros += 1
        if zeros >= size:
            return 0, None
        if spill is None or spill.t != SCALAR or S_SPILL not in types:
            return None
        spilled = 0
        while k + spilled < 8 and types[k + spilled] == S_SPILL:
            spilled += 1
        if spilled != size or not spill.const:
            return None
        return spill.tv, spi

    @staticmethod
    def _arg_types(arg: Arg) -> tuple[tuple[int, ...], str | None]:
        mem = (STACK, PKT, PKT_META, MAP_KEY, MAP_VALUE, MEM, MEM | RINGBUF)
        if arg == Arg.CONST_MAP_PTR:
            return (MAP_PTR,), None
        if arg == Arg.CTX:
            return (CTX,), None
        if arg in (Arg.MAP_KEY, Arg.MAP_VALUE, Arg.UNINIT_MAP_VALUE):
            return (STACK, PKT, PKT_META, MAP_KEY, MAP_VALUE, MEM, MEM | RINGBUF), \
                "fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, trusted_ptr_"
        if arg == Arg.TASK_BTF_ID:  # btf_ptr_types
            return (BTF_ID, BTF_ID | TRUSTED, BTF_ID | RCU), "ptr_, trusted_ptr_, rcu_ptr_"
        if arg in (Arg.SOCK_COMMON, Arg.SOCK_RELEASE):  # btf_id_sock_common_types
            return (SOCK_COMMON, SOCK, BTF_ID), \
                "sock_common, sock, tcp_sock, xdp_sock, ptr_, trusted_ptr_"
        if arg in (Arg.MEM, Arg.MEM_OR_NULL, Arg.MEM_RDONLY, Arg.UNINIT_MEM,
                   Arg.MEM_RDONLY_OR_NULL,
                   Arg.FIXED_U32_UNINIT, Arg.FIXED_MEM_RDONLY, Arg.FIXED_S64_OUT):
            return mem, "fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, " \
                "trusted_ptr_"
        if arg in (Arg.CONST_SIZE, Arg.CONST_SIZE_OR_ZERO, Arg.CONST_ALLOC_SIZE_OR_ZERO):
            return (SCALAR,), None
        if arg == Arg.RINGBUF_MEM_RELEASE:
            return (MEM | RINGBUF,), None
        if arg == Arg.FUNC:
            return (FUNC,), None
        if arg == Arg.STACK_OR_NULL:
            return (STACK,), None
        if arg == Arg.SPIN_LOCK:
            return (MAP_VALUE, BTF_ID | ALLOC), "map_value, ptr_"
        if arg in (Arg.DYNPTR, Arg.DYNPTR_RINGBUF_UNINIT, Arg.DYNPTR_RINGBUF_RELEASE,
                   Arg.DYNPTR_LOCAL_UNINIT):
            return (STACK, DYNPTR), None  # dynptr_types: PTR_TO_STACK, CONST_PTR_TO_DYNPTR
        return (MAP_VALUE,), None

    def _helper_mem(self, st: State, n: int, reg: Reg, size: int, *, write: bool,
                    zero_ok: bool = False) -> None:
        """check_helper_mem_access."""
        t = reg.t
        if t in (PKT, PKT_META):
            self._pkt(n, reg, reg.off, size, zero_ok)
        elif t == MAP_VALUE:
            m = reg.map
            assert m is not None
            if write and _rdonly(m):
                raise Refuse(f"write into map forbidden, value_size={m.value_size} "
                             f"off={reg.off} size={size}")
            if not write and m.flags & BPF_F_WRONLY_PROG:
                raise Refuse(f"read from map forbidden, value_size={m.value_size} "
                             f"off={reg.off} size={size}")
            self._region(n, reg, reg.off, size, m.value_size, "map value", zero_ok)
            self._field_overlap(m, reg, reg.off, size)
        elif t == MAP_KEY:
            assert reg.map is not None
            self._region(n, reg, reg.off, size, reg.map.key_size, "map key", zero_ok)
        elif t & 0xFF == MEM:
            if write and t & RDONLY:
                raise Refuse(f"R{n} cannot write into {type_str(t)}")
            self._region(n, reg, reg.off, size, reg.msize, "memory", zero_ok)
        elif t == STACK:
            frame = st.frames[reg.frame]
            if size == 0 and not zero_ok:  # check_stack_range_initialized (a ringbuf's key)
                raise Refuse("invalid zero-sized read")
            if reg.const:
                lo = reg.off + _s64(reg.tv)
                if lo < -MAX_BPF_STACK or lo + size > 0:
                    kind = "write to" if write else "read from"
                    raise Refuse(f"invalid {kind} stack R{n} off={reg.off} size={size}",
                                 errno.EACCES if size == 0 else _stack_oob_errno(lo))
            else:
                _stack_var_bounded(n, reg, write)
                lo = reg.smin + reg.off
                if lo < -MAX_BPF_STACK or reg.smax + reg.off + size > 0:
                    kind = "write to" if write else "read from"
                    raise Refuse(f"invalid variable-offset {kind} stack R{n} "
                                 f"var_off={tnum_str((reg.tv, reg.tm))} off={reg.off} "
                                 f"size={size}", _stack_oob_errno(lo))
            self._note_depth(frame, -lo)
            hi = (reg.off + _s64(reg.tv) if reg.const else reg.smax + reg.off) + size
            self._stack_read_range(st, reg.frame, lo, max(hi, lo + 1))
            if not write:  # check_stack_range_initialized: special slots are no data
                for a in range(lo, hi):
                    spi = (-a - 1) // 8
                    if frame.slot(spi)[0][a + 8 * (spi + 1)] in _SPECIAL_SLOTS:
                        where = f"off {lo}" if reg.const else \
                            f"var_off {tnum_str((reg.tv, reg.tm))}"
                        raise Refuse(f"invalid read from stack R{n} {where}+{a - lo} size "
                                     f"{size}")
            if write:
                for a in range(lo, hi):  # check_stack_range_initialized's raw mode
                    spi = (-a - 1) // 8
                    if frame.slot(spi)[0][a + 8 * (spi + 1)] == S_DYNPTR:
                        raise Refuse(f"potential write to dynptr at off={a} disallowed")
                for a in range(lo, hi):
                    spi = (-a - 1) // 8
                    k = a + 8 * (spi + 1)
                    # the helper writes these bytes: whatever was spilled there is gone
                    self._destroy_dynptr(st, frame, spi)
                    types, _ = frame.slot(spi)
                    b = bytearray(S_MISC if x == S_SPILL else x for x in types)
                    b[k] = S_MISC
                    frame.set_slot(spi, (bytes(b), None))
        elif t == CTX and self.syscall:  # a syscall program's context, read and written
            self._region(n, reg, reg.off, size, _SYSCALL_CTX_MAX, "context", zero_ok)
            self.facts.note_ctx_mem(self.pc, reg.off + size)  # max_ctx_offset counts it
        else:
            if zero_ok and size == 0 and reg.is_null():
                return
            raise Refuse(f"R{n} type={type_str(t)} expected=fp")

    # -- after do_check ---------------------------------------------------------------------
    def _check_max_stack_depth(self) -> None:
        """check_max_stack_depth: from the main program and from each asynchronous
        callback (a timer's or work item's, the exception callback), the last function
        first, every chain of calls - a callback whose address a function takes counts
        as called there, an asynchronous one only when called directly - within 512
        bytes of stack (each function's depth rounded up to 16, as the JIT has it)."""
        ends = sorted(self.starts | ({self.exc_cb} if self.exc_cb is not None else set()))
        ends.append(len(self.insns))
        asyncs = self.async_cbs | ({self.exc_cb} if self.exc_cb is not None else set())

        def refs(sub: int) -> list[tuple[int, int, bool]]:
            """The calls and callback addresses of the function at ``sub``, in order:
            (pc, target, a direct call)."""
            out = []
            for pc in range(sub, ends[ends.index(sub) + 1]):
                i = self.insns[pc]
                if (i.code == op.OP_CALL and i.src == op.CallSrc.BPF_PSEUDO_CALL) or (
                        i.code == op.OP_LD_IMM64 and i.src == op.PseudoSrc.BPF_PSEUDO_FUNC):
                    out.append((pc, pc + 1 + i.imm, i.code == op.OP_CALL))
            return out

        # a callback is one a reached call pushed (is_cb); the exception callback too
        cbs = self.sync_cbs | self.async_cbs

        def walk(sub: int, total: int, frames: int, chain: tuple[int, ...]) -> bool:
            """Walks ``sub`` called along ``chain``; whether a tail call is reachable
            from it."""
            if frames > MAX_CALL_FRAMES:  # a recursive call graph ends here
                raise Refuse(f"the call stack of {frames - 1} frames is too deep !",
                             errno.E2BIG)
            # bpf-to-bpf calls mixed with tail calls: at most 256 bytes below a tail call
            # (33 tail calls then stay within 8 KiB of kernel stack)
            tails = bool(chain) and self._has_tail_call(sub)  # a callee's (not a root's)
            if tails and total >= 256:
                raise Refuse(f"tail_calls are not allowed when call stack of previous frames "
                             f"is {total} bytes. Too large")
            total += -(-self.depth.get(sub, 0) // 16) * 16  # the JIT's round_up(depth, 16)
            if total > MAX_BPF_STACK:
                raise Refuse(f"combined stack size of {frames} calls is {total}. Too large")
            for at, c, direct in refs(sub):
                if c in asyncs:
                    if not direct:  # it runs on a stack of its own
                        continue
                    if c == self.exc_cb:
                        # (Linux 6.18 prints it without a newline: the stats line follows)
                        raise Refuse(f"insn {at} cannot call exception cb directly",
                                     errno.EINVAL, glued=True)
                tails = walk(c, total, frames + 1, (*chain, sub)) or tails
            if tails:
                # a tail call reachable from here keeps the tail call counter through
                # every frame on the stack (tail_call_reachable), which a callback's
                # helper-made frame cannot (measured: a callback reaching a function
                # with a tail call, even in dead code, is refused)
                for f in (sub, *reversed(chain)):
                    if f == self.exc_cb:
                        raise Refuse("cannot tail call within exception cb", errno.EINVAL)
                    if f in cbs:
                        raise Refuse("cannot tail call within callback", errno.EINVAL)
            return tails

        for root in sorted({0} | asyncs, reverse=True):
            walk(root, 0, 1, ())

    def _check_throw_in_callbacks(self) -> None:
        """check_max_stack_depth_subprog: bpf_throw in a callback, or in a function a
        callback calls, cannot unwind the helper that called the callback."""
        throws = {pc for pc, name in self.kfunc_at.items() if name == THROW_KFUNC}
        if not throws:
            return
        n = len(self.insns)
        cbs = {pc + 1 + i.imm for pc, i in enumerate(self.insns)
               if i.code == op.OP_LD_IMM64 and i.src == op.PseudoSrc.BPF_PSEUDO_FUNC and
               0 <= pc + 1 + i.imm < n}
        exc = {self.exc_cb} if self.exc_cb is not None else set()
        starts = sorted(set(self.subprogs) | cbs | exc)
        ends = dict(zip(starts, [*starts[1:], n], strict=True))
        seen: set[tuple[int, bool]] = set()

        # a callback is one a reached call pushed (push_callback_call, push_async_cb) and
        # the exception callback (mark_subprog_exc_cb); an address taken on no reached
        # path is a plain function here
        is_cb = self.sync_cbs | self.async_cbs | exc

        def walk(sub: int, in_cb: bool) -> None:
            in_cb = in_cb or sub in is_cb  # this function or one on the call chain
            if (sub, in_cb) in seen:
                return
            seen.add((sub, in_cb))
            for pc in range(sub, ends[sub]):
                i = self.insns[pc]
                if pc in throws and in_cb:
                    raise Refuse(f"bpf_throw kfunc (insn {pc}) cannot be called from callback "
                                 f"subprog {starts.index(sub)}", errno.EINVAL)
                if i.code == op.OP_CALL and i.src == op.CallSrc.BPF_PSEUDO_CALL:
                    walk(pc + 1 + i.imm, in_cb)
                elif i.code == op.OP_LD_IMM64 and i.src == op.PseudoSrc.BPF_PSEUDO_FUNC and \
                        pc + 1 + i.imm in cbs and pc + 1 + i.imm not in self.async_cbs:
                    walk(pc + 1 + i.imm, in_cb)

        # check_max_stack_depth's roots, the last function first: async and exception
        # callbacks (an async one is not entered from where its address is taken), main
        for root in sorted({0} | self.async_cbs | exc, reverse=True):
            walk(root, False)


def verify(spec: ProgramSpec, maps: dict[str, MapSpec], *,
           limit: int = BPF_COMPLEXITY_LIMIT_INSNS, btf: Btf | None = None,
           core_btf: str | os.PathLike[str] | None = None) -> VerifierResult:
    """Verify one linked program as Linux 6.18 does when root loads it.

    ``maps`` are the collection's map specs by name (what ``spec.map_refs``
    names). A program with CO-RE relocations is verified as relocated, the
    way libbpf hands it to the kernel: against ``core_btf`` (default: the
    running kernel's BTF, else pyxdp's shipped one) with ``btf`` the
    object's own; a relocation without a target poisons its instruction as
    libbpf does. Raises :class:`~pyxdp.errors.VerifierError` with Linux's
    message for the first failure on the first path that has one.

    XDP and ``SEC("syscall")`` programs are checked (each type's context and
    helper set); a program of another type raises
    :class:`~pyxdp.errors.NotSupportedError` rather than being judged by XDP's
    rules.
    """
    if spec.prog_type not in ("xdp", "syscall"):
        raise NotSupportedError(f"{spec.name}: pyxdp's verifier checks XDP and syscall programs "
                                f"only, not a {spec.prog_type} program (section "
                                f"{spec.section!r})")
    if spec.flags & ~_PROG_FLAGS:  # bpf_prog_load refuses them before any verifier log
        raise VerifierError(f"{spec.name}: prog_flags {spec.flags:#x} has bits BPF_PROG_LOAD "
                            "does not know", errno.EINVAL, "")
    # The walk allocates registers and states by the hundred thousand and makes no cycles
    # of them: the cyclic collector would only rescan the kept states over and over (a
    # fifth of the time on large programs).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _verify(spec, maps, limit=limit, btf=btf, core_btf=core_btf)
    finally:
        if enabled:
            gc.enable()


def _verify(spec: ProgramSpec, maps: dict[str, MapSpec], *, limit: int, btf: Btf | None,
            core_btf: str | os.PathLike[str] | None) -> VerifierResult:
    if not spec.core_relos:
        return _Verifier(spec, maps, limit=limit, btf=btf, core_btf=core_btf).run()
    target = core_target(core_btf)
    try:
        relocated = apply_core_relos(spec, btf, target, target_name=target.path, poison=False)
    except CoreRelocationError as failed:
        # libbpf poisons the instruction; Linux refuses it only where it is reached, and
        # then libbpf's account of the relocation is the useful message
        relocated = apply_core_relos(spec, btf, target, target_name=target.path, poison=True)
        try:
            return _Verifier(relocated, maps, limit=limit, btf=btf, core_btf=core_btf).run()
        except VerifierError as e:
            if e.reason.startswith(f"invalid func unknown#{POISON_HELPER}"):
                raise failed from e
            raise
    return _Verifier(relocated, maps, limit=limit, btf=btf, core_btf=core_btf).run()
