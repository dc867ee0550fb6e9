"""Helper prototypes an XDP program may call: ``struct bpf_func_proto`` as
``xdp_func_proto`` (net/core/filter.c) and ``bpf_base_func_proto``
(kernel/bpf/helpers.c) give them to a program loaded by root (CAP_BPF,
CAP_PERFMON), and the map/helper pairs ``check_map_func_compatibility``
(kernel/bpf/verifier.c) allows.

Each prototype lists its argument types (``enum bpf_arg_type``, spelled
short here), its return type and whether it changes packet data
(``bpf_helper_changes_pkt_data``: the verifier then forgets every packet
pointer).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

from pyxdp.asm.helpers_names import PYXDP_FUNC_REDIRECT_XSK
from pyxdp.uapi.bpf import BPF_SOCK_SIZE, BpfSock
from pyxdp.uapi.bpf import BpfMapType as MT

__all__ = ["MAP_FUNCS", "MIGHT_SLEEP_HELPERS", "PKT_ACCESS", "PROTOS", "SLEEPABLE_MAPS",
           "SYSCALL_HELPERS", "SYSCALL_MODELLED", "UNMODELLED_XDP_HELPERS", "Arg",
           "FuncProto", "Ret",
           "bpf_sock_is_valid_access", "func_maps"]


class Arg(Enum):
    ANYTHING = auto()
    CTX = auto()
    CONST_MAP_PTR = auto()
    MAP_KEY = auto()
    MAP_VALUE = auto()
    UNINIT_MAP_VALUE = auto()
    MEM_RDONLY = auto()          # ARG_PTR_TO_MEM | MEM_RDONLY: bytes the helper reads
    MEM_RDONLY_OR_NULL = auto()
    MEM = auto()                 # ARG_PTR_TO_MEM: read and written
    MEM_OR_NULL = auto()         # ARG_PTR_TO_MEM_OR_NULL | MEM_WRITE: written, or NULL
    UNINIT_MEM = auto()          # ARG_PTR_TO_UNINIT_MEM: written only
    CONST_SIZE = auto()
    CONST_SIZE_OR_ZERO = auto()
    CONST_ALLOC_SIZE_OR_ZERO = auto()
    RINGBUF_MEM_RELEASE = auto()
    FUNC = auto()
    STACK_OR_NULL = auto()
    FIXED_U32_UNINIT = auto()    # ARG_PTR_TO_FIXED_SIZE_MEM | MEM_UNINIT, 4 bytes
    SPIN_LOCK = auto()
    CONST_STR = auto()
    DYNPTR = auto()              # ARG_PTR_TO_DYNPTR | MEM_RDONLY: an initialised dynptr
    DYNPTR_RINGBUF_UNINIT = auto()   # ... | DYNPTR_TYPE_RINGBUF | MEM_UNINIT: made here
    DYNPTR_LOCAL_UNINIT = auto()     # ... | DYNPTR_TYPE_LOCAL | MEM_UNINIT
    DYNPTR_RINGBUF_RELEASE = auto()  # ... | DYNPTR_TYPE_RINGBUF | OBJ_RELEASE: ended here
    TIMER = auto()               # ARG_PTR_TO_TIMER: a map value's struct bpf_timer
    SOCK_COMMON = auto()         # ARG_PTR_TO_BTF_ID_SOCK_COMMON: a socket pointer
    SOCK_RELEASE = auto()        # ARG_PTR_TO_BTF_ID_SOCK_COMMON | OBJ_RELEASE
    KPTR_XCHG_DEST = auto()      # ARG_KPTR_XCHG_DEST: a map value's __kptr field
    BTF_ID_OR_NULL_RELEASE = auto()  # ARG_PTR_TO_BTF_ID_OR_NULL | OBJ_RELEASE
    FIXED_MEM_RDONLY = auto()    # ARG_PTR_TO_FIXED_SIZE_MEM | MEM_RDONLY (FuncProto.sizes)
    # ARG_PTR_TO_FIXED_SIZE_MEM | MEM_UNINIT | MEM_WRITE | MEM_ALIGNED, 8 bytes: a long
    # the helper stores (bpf_strtol's result)
    FIXED_S64_OUT = auto()
    PERCPU_BTF_ID = auto()       # ARG_PTR_TO_PERCPU_BTF_ID: a per-CPU object's pointer
    TASK_BTF_ID = auto()         # ARG_PTR_TO_BTF_ID of struct task_struct


class Ret(Enum):
    INTEGER = auto()
    VOID = auto()
    MAP_VALUE_OR_NULL = auto()
    RINGBUF_MEM_OR_NULL = auto()
    SOCKET_OR_NULL = auto()       # RET_PTR_TO_SOCKET_OR_NULL, an acquired reference
    SOCK_COMMON_OR_NULL = auto()  # RET_PTR_TO_SOCK_COMMON_OR_NULL, an acquired reference
    DYNPTR_MEM_OR_NULL = auto()  # bpf_dynptr_data: memory of the constant size, or NULL
    KPTR_OR_NULL = auto()        # RET_PTR_TO_BTF_ID_OR_NULL: the kptr field's object, acquired
    # RET_PTR_TO_MEM_OR_BTF_ID: of a per-CPU object, one CPU's copy (MEM_ALLOC | MEM_RCU)
    PERCPU_COPY = auto()
    TASK_TRUSTED = auto()  # RET_PTR_TO_BTF_ID_TRUSTED to struct task_struct (the current task)
    BTF_ID_OR_NULL = auto()  # RET_PTR_TO_BTF_ID_OR_NULL to struct FuncProto.ret_struct


@dataclass(frozen=True, slots=True)
class FuncProto:
    args: tuple[Arg, ...]
    ret: Ret = Ret.INTEGER
    gpl_only: bool = False
    pkt_data: bool = False  # bpf_helper_changes_pkt_data
    sizes: tuple[int, ...] = ()  # arg_size of each FIXED_MEM_RDONLY argument, by position
    ret_struct: str = ""  # the kernel struct a BTF_ID_OR_NULL result points to


A = Arg
PROTOS: dict[int, FuncProto] = {
    1: FuncProto((A.CONST_MAP_PTR, A.MAP_KEY), Ret.MAP_VALUE_OR_NULL),
    2: FuncProto((A.CONST_MAP_PTR, A.MAP_KEY, A.MAP_VALUE, A.ANYTHING)),
    3: FuncProto((A.CONST_MAP_PTR, A.MAP_KEY)),
    5: FuncProto(()),
    6: FuncProto((A.MEM_RDONLY, A.CONST_SIZE), gpl_only=True),
    # bpf_trace_vprintk(fmt, fmt_size, args, data_len) (kernel/trace/bpf_trace.c)
    177: FuncProto((A.MEM_RDONLY, A.CONST_SIZE, A.MEM_RDONLY_OR_NULL, A.CONST_SIZE_OR_ZERO),
                   gpl_only=True),
    7: FuncProto(()),
    8: FuncProto(()),
    14: FuncProto(()),
    12: FuncProto((A.CTX, A.CONST_MAP_PTR, A.ANYTHING), Ret.VOID),
    23: FuncProto((A.ANYTHING, A.ANYTHING)),
    25: FuncProto((A.CTX, A.CONST_MAP_PTR, A.ANYTHING, A.MEM_RDONLY, A.CONST_SIZE_OR_ZERO),
                  gpl_only=True),
    28: FuncProto((A.MEM_RDONLY_OR_NULL, A.CONST_SIZE_OR_ZERO, A.MEM_RDONLY_OR_NULL,
                   A.CONST_SIZE_OR_ZERO, A.ANYTHING)),
    42: FuncProto(()),
    158: FuncProto((), Ret.TASK_TRUSTED, gpl_only=True),
    # the current task's ids and name, signals (tracing helpers bpf_base_func_proto gives)
    15: FuncProto(()),
    16: FuncProto((A.UNINIT_MEM, A.CONST_SIZE)),
    35: FuncProto((), gpl_only=True),
    80: FuncProto(()),
    109: FuncProto((A.ANYTHING,)),
    117: FuncProto((A.ANYTHING,)),
    120: FuncProto((A.ANYTHING, A.ANYTHING, A.UNINIT_MEM, A.CONST_SIZE)),
    123: FuncProto((A.ANYTHING,)),
    112: FuncProto((A.UNINIT_MEM, A.CONST_SIZE_OR_ZERO, A.ANYTHING), gpl_only=True),
    114: FuncProto((A.UNINIT_MEM, A.CONST_SIZE_OR_ZERO, A.ANYTHING), gpl_only=True),
    # callbacks: bpf_find_vma(task, addr, cb, ctx, flags), bpf_user_ringbuf_drain(map, cb,
    # ctx, flags)
    180: FuncProto((A.TASK_BTF_ID, A.ANYTHING, A.FUNC, A.STACK_OR_NULL, A.ANYTHING)),
    209: FuncProto((A.CONST_MAP_PTR, A.FUNC, A.STACK_OR_NULL, A.ANYTHING)),
    # bpf_skc_to_*: a socket as one of its kinds, or NULL (is_ptr_cast_function: the
    # result shares the argument's reference)
    136: FuncProto((A.SOCK_COMMON,), Ret.BTF_ID_OR_NULL, ret_struct="tcp6_sock"),
    137: FuncProto((A.SOCK_COMMON,), Ret.BTF_ID_OR_NULL, ret_struct="tcp_sock"),
    138: FuncProto((A.SOCK_COMMON,), Ret.BTF_ID_OR_NULL, ret_struct="tcp_timewait_sock"),
    139: FuncProto((A.SOCK_COMMON,), Ret.BTF_ID_OR_NULL, ret_struct="tcp_request_sock"),
    140: FuncProto((A.SOCK_COMMON,), Ret.BTF_ID_OR_NULL, ret_struct="udp6_sock"),
    178: FuncProto((A.SOCK_COMMON,), Ret.BTF_ID_OR_NULL, ret_struct="unix_sock"),
    105: FuncProto((A.MEM_RDONLY, A.CONST_SIZE, A.ANYTHING, A.FIXED_S64_OUT)),
    106: FuncProto((A.MEM_RDONLY, A.CONST_SIZE, A.ANYTHING, A.FIXED_S64_OUT)),
    44: FuncProto((A.CTX, A.ANYTHING), pkt_data=True),
    51: FuncProto((A.CONST_MAP_PTR, A.ANYTHING, A.ANYTHING)),
    54: FuncProto((A.CTX, A.ANYTHING), pkt_data=True),
    65: FuncProto((A.CTX, A.ANYTHING), pkt_data=True),
    69: FuncProto((A.CTX, A.MEM, A.CONST_SIZE, A.ANYTHING)),
    87: FuncProto((A.CONST_MAP_PTR, A.MAP_VALUE, A.ANYTHING)),
    88: FuncProto((A.CONST_MAP_PTR, A.UNINIT_MAP_VALUE)),
    89: FuncProto((A.CONST_MAP_PTR, A.UNINIT_MAP_VALUE)),
    93: FuncProto((A.SPIN_LOCK,), Ret.VOID),
    94: FuncProto((A.SPIN_LOCK,), Ret.VOID),
    118: FuncProto(()),
    125: FuncProto(()),
    130: FuncProto((A.CONST_MAP_PTR, A.MEM_RDONLY, A.CONST_SIZE_OR_ZERO, A.ANYTHING)),
    131: FuncProto((A.CONST_MAP_PTR, A.CONST_ALLOC_SIZE_OR_ZERO, A.ANYTHING),
                   Ret.RINGBUF_MEM_OR_NULL),
    132: FuncProto((A.RINGBUF_MEM_RELEASE, A.ANYTHING), Ret.VOID),
    133: FuncProto((A.RINGBUF_MEM_RELEASE, A.ANYTHING), Ret.VOID),
    134: FuncProto((A.CONST_MAP_PTR, A.ANYTHING)),
    160: FuncProto(()),
    163: FuncProto((A.CTX, A.ANYTHING, A.FIXED_U32_UNINIT, A.ANYTHING, A.ANYTHING)),
    164: FuncProto((A.CONST_MAP_PTR, A.FUNC, A.STACK_OR_NULL, A.ANYTHING)),
    165: FuncProto((A.MEM_OR_NULL, A.CONST_SIZE_OR_ZERO, A.CONST_STR, A.MEM_RDONLY_OR_NULL,
                    A.CONST_SIZE_OR_ZERO), gpl_only=True),
    181: FuncProto((A.ANYTHING, A.FUNC, A.STACK_OR_NULL, A.ANYTHING)),
    182: FuncProto((A.MEM_RDONLY, A.CONST_SIZE, A.CONST_STR)),
    # bpf_timer_init(timer, map, flags), _set_callback(timer, cb), _start(timer, nsecs,
    # flags), _cancel(timer): verified as Linux does (pyxdp's engines lack them)
    169: FuncProto((A.TIMER, A.CONST_MAP_PTR, A.ANYTHING), gpl_only=True),
    170: FuncProto((A.TIMER, A.FUNC), gpl_only=True),
    171: FuncProto((A.TIMER, A.ANYTHING, A.ANYTHING), gpl_only=True),
    172: FuncProto((A.TIMER,), gpl_only=True),
    188: FuncProto((A.CTX,)),
    189: FuncProto((A.CTX, A.ANYTHING, A.UNINIT_MEM, A.CONST_SIZE)),
    190: FuncProto((A.CTX, A.ANYTHING, A.MEM_RDONLY, A.CONST_SIZE)),
    195: FuncProto((A.CONST_MAP_PTR, A.MAP_KEY, A.ANYTHING), Ret.MAP_VALUE_OR_NULL),
    # bpf_dynptr_read(dst, len, src, offset, flags), bpf_dynptr_write(dst, offset, src,
    # len, flags): an XDP dynptr's write changes no packet pointers (only skb ones do).
    # bpf_dynptr_from_mem(data, size, flags, ptr): data must be a map value
    197: FuncProto((A.UNINIT_MEM, A.CONST_SIZE_OR_ZERO, A.ANYTHING, A.DYNPTR_LOCAL_UNINIT)),
    # bpf_ringbuf_reserve_dynptr(map, size, flags, ptr), _submit_dynptr(ptr, flags),
    # _discard_dynptr(ptr, flags), bpf_dynptr_data(ptr, offset, len)
    198: FuncProto((A.CONST_MAP_PTR, A.ANYTHING, A.ANYTHING, A.DYNPTR_RINGBUF_UNINIT)),
    199: FuncProto((A.DYNPTR_RINGBUF_RELEASE, A.ANYTHING), Ret.VOID),
    200: FuncProto((A.DYNPTR_RINGBUF_RELEASE, A.ANYTHING), Ret.VOID),
    203: FuncProto((A.DYNPTR, A.ANYTHING, A.CONST_ALLOC_SIZE_OR_ZERO), Ret.DYNPTR_MEM_OR_NULL),
    201: FuncProto((A.UNINIT_MEM, A.CONST_SIZE_OR_ZERO, A.DYNPTR, A.ANYTHING, A.ANYTHING)),
    202: FuncProto((A.DYNPTR, A.ANYTHING, A.MEM_RDONLY, A.CONST_SIZE_OR_ZERO, A.ANYTHING)),
    208: FuncProto(()),
    # net/core/filter.c: bpf_xdp_sk_lookup_udp/_tcp, bpf_sk_release, bpf_xdp_skc_lookup_tcp
    85: FuncProto((A.CTX, A.MEM_RDONLY, A.CONST_SIZE_OR_ZERO, A.ANYTHING, A.ANYTHING),
                  Ret.SOCKET_OR_NULL),
    84: FuncProto((A.CTX, A.MEM_RDONLY, A.CONST_SIZE_OR_ZERO, A.ANYTHING, A.ANYTHING),
                  Ret.SOCKET_OR_NULL),
    86: FuncProto((A.SOCK_RELEASE,)),
    99: FuncProto((A.CTX, A.MEM_RDONLY, A.CONST_SIZE_OR_ZERO, A.ANYTHING, A.ANYTHING),
                  Ret.SOCK_COMMON_OR_NULL),
    # bpf_tcp_check_syncookie, bpf_tcp_gen_syncookie(sk, iph, iph_len, th, th_len)
    100: FuncProto((A.SOCK_COMMON, A.MEM_RDONLY, A.CONST_SIZE, A.MEM_RDONLY, A.CONST_SIZE),
                   gpl_only=True),
    110: FuncProto((A.SOCK_COMMON, A.MEM_RDONLY, A.CONST_SIZE, A.MEM_RDONLY, A.CONST_SIZE),
                   gpl_only=True),
    # bpf_tcp_raw_gen_syncookie_ipv4/6(iph, th, th_len), _check_ipv4/6(iph, th): the
    # headers are fixed-size (struct iphdr 20, struct ipv6hdr 40, struct tcphdr 20)
    204: FuncProto((A.FIXED_MEM_RDONLY, A.MEM_RDONLY, A.CONST_SIZE_OR_ZERO), gpl_only=True,
                   sizes=(20,)),
    205: FuncProto((A.FIXED_MEM_RDONLY, A.MEM_RDONLY, A.CONST_SIZE_OR_ZERO), gpl_only=True,
                   sizes=(40,)),
    206: FuncProto((A.FIXED_MEM_RDONLY, A.FIXED_MEM_RDONLY), gpl_only=True, sizes=(20, 20)),
    207: FuncProto((A.FIXED_MEM_RDONLY, A.FIXED_MEM_RDONLY), gpl_only=True, sizes=(40, 20)),
    # bpf_kptr_xchg(dst, ptr): the verifier's _kptr_xchg checks it (process_kptr_func)
    194: FuncProto((A.KPTR_XCHG_DEST, A.BTF_ID_OR_NULL_RELEASE), Ret.KPTR_OR_NULL),
    # bpf_per_cpu_ptr(ptr, cpu), bpf_this_cpu_ptr(ptr): of per-CPU objects only (pyxdp has
    # no per-CPU kernel variables, __ksym)
    153: FuncProto((A.PERCPU_BTF_ID, A.ANYTHING), Ret.PERCPU_COPY),
    154: FuncProto((A.PERCPU_BTF_ID,), Ret.PERCPU_COPY),
    # bpf_probe_read_kernel(dst, size, unsafe_ptr) and its _str (root: CAP_PERFMON)
    113: FuncProto((A.UNINIT_MEM, A.CONST_SIZE_OR_ZERO, A.ANYTHING), gpl_only=True),
    115: FuncProto((A.UNINIT_MEM, A.CONST_SIZE_OR_ZERO, A.ANYTHING), gpl_only=True),
    # pyxdp's extension (never Linux's): bpf_redirect_xsk(ctx, flags).
    PYXDP_FUNC_REDIRECT_XSK: FuncProto((A.CTX, A.ANYTHING)),
}

# Helpers Linux 6.18 gives XDP programs loaded by root (measured: every id 1..211 called
# from an XDP program) whose prototypes pyxdp's verifier does not model: perf events,
# task/cgroup storage, branch snapshots, ... (Some PROTOS, such as
# the current task's, strtol, the socket casts, are the verifier's only: pyxdp's engines
# refuse a program calling them.)
UNMODELLED_XDP_HELPERS = frozenset({
    17, 22, 37, 55, 141, 148, 149, 156, 157, 175, 176, 191, 196, 210, 211})

# Of those, the ones that might sleep (bpf_copy_from_user, bpf_copy_from_user_task), by
# whether they are GPL-only: check_helper_call refuses them in a program that cannot sleep
# (XDP) before looking at any argument.
MIGHT_SLEEP_HELPERS: dict[int, bool] = {148: False, 191: True}

# Helpers Linux 6.18 gives SEC("syscall") programs loaded by root (syscall_prog_func_proto,
# then tracing_prog_func_proto; measured: every id 1..211 called from a sleepable
# syscall program); any other is "program of this type cannot use helper".
SYSCALL_HELPERS = frozenset({
    1, 2, 3, 4, 5, 6, 7, 8, 12, 14, 15, 16, 17, 22, 25, 27, 35, 37, 42, 45, 46, 55, 67,
    80, 87, 88, 89, 93, 94, 105, 106, 107, 108, 109, 111, 112, 113, 114, 115, 117, 118,
    120, 121, 123, 125, 130, 131, 132, 133, 134, 136, 137, 138, 139, 140, 141, 147, 148,
    149, 153, 154, 156, 157, 158, 162, 164, 165, 166, 167, 168, 169, 170, 171, 172, 173,
    175, 176, 177, 178, 179, 180, 181, 182, 188, 191, 194, 195, 196, 197, 198, 199, 200,
    201, 202, 203, 208, 209, 210, 211})
# Of those, the ones whose PROTOS entry and engine helper are the same for a syscall
# program as for XDP (bpf_base_func_proto's map, time, random, ring buffer, dynptr,
# string and loop helpers); the others (the current task, probe reads, tail calls,
# timers, spin locks, per-CPU pointers, tracing's perf_event_output and
# xdp_get_buff_len...) pyxdp does not provide to a syscall program.
SYSCALL_MODELLED = frozenset({
    1, 2, 3, 5, 6, 7, 8, 42, 87, 88, 89, 118, 125, 130, 131, 132, 133, 134, 164, 165,
    177, 181, 182, 194, 195, 197, 198, 199, 200, 201, 202, 203, 208})
# check_map_prog_compatibility: the map types a sleepable program may use (measured);
# any other is "Sleepable programs can only use array, hash, ringbuf and local storage
# maps".
SLEEPABLE_MAPS = frozenset({
    MT.BPF_MAP_TYPE_HASH, MT.BPF_MAP_TYPE_LRU_HASH, MT.BPF_MAP_TYPE_ARRAY,
    MT.BPF_MAP_TYPE_PERCPU_HASH, MT.BPF_MAP_TYPE_PERCPU_ARRAY,
    MT.BPF_MAP_TYPE_LRU_PERCPU_HASH, MT.BPF_MAP_TYPE_ARRAY_OF_MAPS,
    MT.BPF_MAP_TYPE_HASH_OF_MAPS, MT.BPF_MAP_TYPE_RINGBUF, MT.BPF_MAP_TYPE_USER_RINGBUF,
    MT.BPF_MAP_TYPE_INODE_STORAGE, MT.BPF_MAP_TYPE_SK_STORAGE,
    MT.BPF_MAP_TYPE_TASK_STORAGE, MT.BPF_MAP_TYPE_CGRP_STORAGE, MT.BPF_MAP_TYPE_QUEUE,
    MT.BPF_MAP_TYPE_STACK})

# bpf_func_proto.pkt_access: the helpers XDP may give a packet pointer (map lookups,
# updates, deletes and pushes, bpf_map_lookup_percpu_elem, bpf_csum_diff, the socket
# lookups and the syncookie helpers); any other is "helper access to the packet is
# not allowed".
PKT_ACCESS = frozenset({1, 2, 3, 28, 84, 85, 87, 99, 100, 110, 195, 204, 205, 206, 207})

_LOOKUPS = (1, 2, 3)
_QUEUE = (87, 88, 89)
_RINGBUF = (130, 131, 134, 198, 199, 200)
# check_map_func_compatibility, first switch: what each map type allows (None: any
# helper that does not appear in the second table).
MAP_FUNCS: dict[int, tuple[int, ...] | None] = {
    int(MT.BPF_MAP_TYPE_PROG_ARRAY): (12,),
    int(MT.BPF_MAP_TYPE_PERF_EVENT_ARRAY): (25,),
    int(MT.BPF_MAP_TYPE_RINGBUF): _RINGBUF,
    int(MT.BPF_MAP_TYPE_DEVMAP): (51, 1),
    int(MT.BPF_MAP_TYPE_DEVMAP_HASH): (51, 1),
    int(MT.BPF_MAP_TYPE_CPUMAP): (51,),
    int(MT.BPF_MAP_TYPE_XSKMAP): (51, 1),
    int(MT.BPF_MAP_TYPE_ARRAY_OF_MAPS): (1,),
    int(MT.BPF_MAP_TYPE_HASH_OF_MAPS): (1,),
    int(MT.BPF_MAP_TYPE_QUEUE): _QUEUE,
    int(MT.BPF_MAP_TYPE_STACK): _QUEUE,
    # maps of sockets: lookups, and (may_update_sockmap: XDP may) updates and deletes
    int(MT.BPF_MAP_TYPE_SOCKMAP): (52, 53, 60, 82, 1, 2, 3),
    int(MT.BPF_MAP_TYPE_SOCKHASH): (72, 70, 71, 82, 1, 2, 3),
    int(MT.BPF_MAP_TYPE_REUSEPORT_SOCKARRAY): (82,),
    # local storage: only its own get/delete helpers and bpf_kptr_xchg
    int(MT.BPF_MAP_TYPE_SK_STORAGE): (107, 108, 194),
    int(MT.BPF_MAP_TYPE_INODE_STORAGE): (145, 146, 194),
    int(MT.BPF_MAP_TYPE_TASK_STORAGE): (156, 157, 194),
    int(MT.BPF_MAP_TYPE_CGRP_STORAGE): (210, 211, 194),
    # maps of other program types' helpers: nothing of XDP's may take them
    int(MT.BPF_MAP_TYPE_USER_RINGBUF): (209,),
    int(MT.BPF_MAP_TYPE_STACK_TRACE): (27,),
    int(MT.BPF_MAP_TYPE_CGROUP_ARRAY): (33, 37),
    int(MT.BPF_MAP_TYPE_CGROUP_STORAGE): (81,),
    int(MT.BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE): (81,),
    int(MT.BPF_MAP_TYPE_BLOOM_FILTER): (89, 87),
}
# The second switch: helpers that need particular map types.
_FUNC_MAPS: dict[int, tuple[int, ...]] = {
    12: (int(MT.BPF_MAP_TYPE_PROG_ARRAY),),
    25: (int(MT.BPF_MAP_TYPE_PERF_EVENT_ARRAY),),
    51: (int(MT.BPF_MAP_TYPE_DEVMAP), int(MT.BPF_MAP_TYPE_DEVMAP_HASH),
         int(MT.BPF_MAP_TYPE_CPUMAP), int(MT.BPF_MAP_TYPE_XSKMAP)),
    130: (int(MT.BPF_MAP_TYPE_RINGBUF),),
    131: (int(MT.BPF_MAP_TYPE_RINGBUF),),
    134: (int(MT.BPF_MAP_TYPE_RINGBUF),),
    209: (int(MT.BPF_MAP_TYPE_USER_RINGBUF),),
    198: (int(MT.BPF_MAP_TYPE_RINGBUF),),
    87: (int(MT.BPF_MAP_TYPE_QUEUE), int(MT.BPF_MAP_TYPE_STACK),
         int(MT.BPF_MAP_TYPE_BLOOM_FILTER)),
    88: (int(MT.BPF_MAP_TYPE_QUEUE), int(MT.BPF_MAP_TYPE_STACK)),
    89: (int(MT.BPF_MAP_TYPE_QUEUE), int(MT.BPF_MAP_TYPE_STACK),
         int(MT.BPF_MAP_TYPE_BLOOM_FILTER)),
    195: (int(MT.BPF_MAP_TYPE_PERCPU_ARRAY), int(MT.BPF_MAP_TYPE_PERCPU_HASH),
          int(MT.BPF_MAP_TYPE_LRU_PERCPU_HASH)),
}


def func_maps(func_id: int, map_type: int) -> bool:
    """Whether helper ``func_id`` may take a map of ``map_type``."""
    allowed = MAP_FUNCS.get(map_type)
    if allowed is not None and func_id not in allowed:
        return False
    need = _FUNC_MAPS.get(func_id)
    return need is None or map_type in need


# struct bpf_sock: fields a narrower load may read (bpf_ctx_range: each byte of them).
_S = BpfSock
_NARROW = {int(_S.state), int(_S.family), int(_S.type), int(_S.protocol), int(_S.src_port),
           int(_S.rx_queue_mapping), *range(_S.src_ip4, _S.src_ip4 + 4),
           *range(_S.src_ip6, _S.src_ip6 + 16), *range(_S.dst_ip4, _S.dst_ip4 + 4),
           *range(_S.dst_ip6, _S.dst_ip6 + 16)}


def bpf_sock_is_valid_access(off: int, size: int) -> bool:
    """``bpf_sock_is_valid_access`` (net/core/filter.c) for a read of ``size`` bytes at
    ``off``: 4-byte loads of the u32 fields, narrower power-of-two loads of the ones
    that allow it, 4 or 2 (or 1) bytes of ``dst_port``, nothing of its padding."""
    if off < 0 or off >= BPF_SOCK_SIZE or off % size:
        return False
    if off in _NARROW:
        return size <= 4 and size & (size - 1) == 0
    if off in (_S.dst_port, _S.dst_port + 1):
        field = 4 if size == 4 else 2
        return size <= field and size & (size - 1) == 0
    if _S.dst_port + 2 <= off < _S.dst_ip4:
        return False
    return size == 4


def _punct(c: int) -> bool:
    return 33 <= c <= 47 or 58 <= c <= 64 or 91 <= c <= 96 or 123 <= c <= 126


def _space(c: int) -> bool:
    return c == 32 or 9 <= c <= 13


def bprintf_ok(fmt: bytes, num_args: int) -> bool:
    """bpf_bprintf_prepare as the verifier runs it on bpf_snprintf's constant format:
    printable ASCII, at most ``num_args`` conversions, each one the kernel supports
    (``%d %i %u %x %X`` with ``l``/``ll``, ``%c``, ``%s``, ``%p`` and its ``K x s S B
    ks us i4 I4 i6 I6`` forms, after an optional ``[0 +-][width]``)."""
    fmt = fmt.split(b"\0", 1)[0]

    def at(k: int) -> int:
        return fmt[k] if k < len(fmt) else 0

    def ends(c: int) -> bool:  # what may follow a string or bare pointer conversion
        return c == 0 or _space(c) or _punct(c)

    num_spec = 0
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if not (32 <= c <= 126 or _space(c)):
            return False
        if c != 0x25:  # '%'
            i += 1
            continue
        if at(i + 1) == 0x25:
            i += 2
            continue
        if num_spec >= num_args:
            return False
        i += 1
        while at(i) in b"0+- ":
            i += 1
        if 0x31 <= at(i) <= 0x39:
            i += 1
            while 0x30 <= at(i) <= 0x39:
                i += 1
        c = at(i)
        if c == ord("p"):
            nxt = at(i + 1)
            if ends(nxt):
                pass
            elif nxt in b"ku" and at(i + 2) == ord("s"):
                i += 2
                if not ends(at(i + 1)):
                    return False
            elif nxt in b"KxsSB":
                i += 1
            elif nxt in b"iI" and at(i + 2) in b"46":
                i += 2
            else:
                return False
        elif c == ord("s"):
            if not ends(at(i + 1)):
                return False
        elif c != ord("c"):
            if c == ord("l"):
                i += 1
            if at(i) == ord("l"):
                i += 1
            if at(i) not in b"iduxX" or at(i) == 0:
                return False
        num_spec += 1
        i += 1
    return True
