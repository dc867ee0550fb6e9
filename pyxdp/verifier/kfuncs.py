"""Kernel function (kfunc) prototypes an XDP program may call, as the verifier sees them.

Linux 6.18 gives each kfunc its prototype from the kernel's BTF (the
argument names' suffixes carry meaning: ``__uninit``, ``__opt``,
``__nullable``, ``__sz``, ``__szk``, ``__k``, ``__ign``) and its flags from
the ``BTF_ID_FLAGS`` sets the subsystem registers for
``BPF_PROG_TYPE_XDP`` (``KF_ACQUIRE``, ``KF_RELEASE``, ``KF_RET_NULL``,
``KF_TRUSTED_ARGS``). ``check_kfunc_args`` (kernel/bpf/verifier.c) turns
each argument into a ``enum kfunc_ptr_arg_type``; :class:`KArg` is that
classification made once, by hand, from the prototypes this kernel's
``/sys/kernel/btf/vmlinux`` prints and the flags of the kernel source.

The table is keyed by name and open: :func:`register_kfunc` adds a kfunc
(another subsystem's, e.g. the conntrack or flow-table kfuncs a runtime
provides) without touching the verifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

__all__ = ["KArg", "KFUNCS", "KF_ACQUIRE", "KF_RCU", "KF_RELEASE", "KF_RET_NULL", "RCU_FIELDS",
           "KF_TRUSTED_ARGS",
           "CSS_TASK_ITER", "KF_ITER_DESTROY", "KF_ITER_NEW", "KF_ITER_NEXT", "KF_RCU_PROTECTED",
           "KERNEL_KPTRS", "KPTR_DTORS", "KParam", "KRet", "KfuncProto", "METADATA_KFUNCS",
           "NOT_FOR_SYSCALL", "NOT_FOR_XDP",
           "RCU_PROTECTED_TYPES", "SLEEPABLE_KFUNCS", "SYSCALL_KFUNCS",
           "SYSCALL_VERIFIED_KFUNCS",
           "THROW_KFUNC", "syscall_verified",
           "TRAP_KFUNC", "register_kfunc"]

# include/linux/btf.h
KF_ACQUIRE = 1 << 0
KF_RELEASE = 1 << 1
KF_RET_NULL = 1 << 2
KF_TRUSTED_ARGS = 1 << 4
KF_RCU = 1 << 7
KF_ITER_NEW = 1 << 8
KF_ITER_NEXT = 1 << 9
KF_ITER_DESTROY = 1 << 10
KF_RCU_PROTECTED = 1 << 11


class KArg(Enum):
    """How the verifier checks one argument (``enum kfunc_ptr_arg_type`` and scalars)."""

    SCALAR = auto()        # an integer argument
    CONST = auto()         # ``__k``: a known constant
    CTX = auto()           # KF_ARG_PTR_TO_CTX
    MEM = auto()           # KF_ARG_PTR_TO_MEM: ``size`` bytes read and written
    MEM_SIZE = auto()      # KF_ARG_PTR_TO_MEM_SIZE: memory, the next argument (a slot of
    #                        its own in ``KfuncProto.params``, never visited) its size
    DYNPTR = auto()        # KF_ARG_PTR_TO_DYNPTR, initialised
    DYNPTR_UNINIT = auto()  # ``__uninit``: the kfunc initialises it
    BTF_ID = auto()        # KF_ARG_PTR_TO_BTF_ID: a pointer to kernel struct ``struct``
    ITER = auto()          # KF_ARG_PTR_TO_ITER: ``struct bpf_iter_<struct>`` on the stack
    IGN = auto()           # ``__ign``: not checked at all (the kfunc reads it without faulting)
    IRQ_FLAG = auto()      # KF_ARG_PTR_TO_IRQ_FLAG (``__irq_flag``): a stack slot of IRQ state
    ALLOC = auto()         # KF_ARG_PTR_TO_ALLOC_BTF_ID (``__alloc``): a bpf_obj_new object
    WORKQUEUE = auto()     # KF_ARG_PTR_TO_WORKQUEUE: a map value's struct bpf_wq
    TASK_WORK = auto()     # KF_ARG_PTR_TO_TASK_WORK: a map value's struct bpf_task_work
    MAP = auto()           # KF_ARG_PTR_TO_MAP (``__map``): a map, the workqueue's own
    CALLBACK = auto()      # KF_ARG_PTR_TO_CALLBACK: a static function of the program
    RES_SPIN_LOCK = auto()  # KF_ARG_PTR_TO_RES_SPIN_LOCK: a map value's struct bpf_res_spin_lock
    LIST_HEAD = auto()     # KF_ARG_PTR_TO_LIST_HEAD: a map value's struct bpf_list_head, locked
    LIST_NODE = auto()     # KF_ARG_PTR_TO_LIST_NODE: an owned object's node of that list
    RB_ROOT = auto()       # KF_ARG_PTR_TO_RB_ROOT: a map value's struct bpf_rb_root, locked
    RB_NODE = auto()       # KF_ARG_PTR_TO_RB_NODE: an object's node of that tree
    REFCOUNTED = auto()    # KF_ARG_PTR_TO_REFCOUNTED_KPTR: an object holding a bpf_refcount
    CONST_STR = auto()     # KF_ARG_PTR_TO_CONST_STR (``__str``): a string in read-only map data


class KRet(Enum):
    VOID = auto()
    SCALAR = auto()
    SLICE = auto()         # bpf_dynptr_slice: read-only memory of the constant size
    SLICE_RDWR = auto()    # bpf_dynptr_slice_rdwr
    BTF_ID = auto()        # a pointer to kernel struct ``KfuncProto.ret_struct``
    # bpf_get_kmem_cache: an untrusted pointer to ``ret_struct`` (never NULL to the verifier)
    BTF_ID_UNTRUSTED = auto()
    RDONLY_MEM = auto()    # read-only memory of ``KfuncProto.ret_size`` bytes (iter next)
    KERN_CTX = auto()      # bpf_cast_to_kern_ctx: trusted ``KfuncProto.ret_struct`` pointer
    RDONLY_CAST = auto()   # bpf_rdonly_cast: untrusted pointer to the constant BTF id's type
    OBJ_NEW = auto()       # bpf_obj_new: an object of the program's struct of the constant id
    # a node of the LIST_HEAD (RB_ROOT) argument's list (tree): an object at its offset
    GRAPH_NODE = auto()
    GRAPH_NODE_NON_OWN = auto()  # the same, a non-owning reference (valid until the unlock)
    REFCOUNTED = auto()    # bpf_refcount_acquire: the argument's object, owned
    PERCPU_OBJ_NEW = auto()  # bpf_percpu_obj_new: the same, one copy per CPU (MEM_PERCPU)


@dataclass(frozen=True, slots=True)
class KParam:
    kind: KArg
    size: int = 0          # MEM: the pointee's size
    struct: str = ""       # BTF_ID: the struct's name
    optional: bool = False  # ``__opt`` / ``__nullable``: NULL is allowed
    const_size: bool = False  # MEM_SIZE whose size is ``__szk`` (a known constant)


@dataclass(frozen=True, slots=True)
class KfuncProto:
    params: tuple[KParam, ...]
    ret: KRet = KRet.SCALAR
    flags: int = 0
    ret_struct: str = ""
    ret_size: int = 0
    metadata: bool = False  # an XDP RX metadata kfunc: the program must be device-bound
    pkt_data: bool = False  # is_kfunc_pkt_changing: packet pointers are forgotten
    # is_async_callback_calling_kfunc: its CALLBACK argument runs later on its own, with
    # the WORKQUEUE argument's map, key and value (sleepable: a kworker runs it)
    async_cb: bool = False


P = KParam
_CTX = P(KArg.CTX)
_DYN = P(KArg.DYNPTR)
_U32 = P(KArg.SCALAR)
_IGN = P(KArg.IGN)
_TASK = P(KArg.BTF_ID, struct="task_struct")
_CGRP = P(KArg.BTF_ID, struct="cgroup")
_CRYPTO = P(KArg.BTF_ID, struct="bpf_crypto_ctx")

KFUNCS: dict[str, KfuncProto] = {
    # net/core/xdp.c: xdp_metadata_kfunc_ids (bpf_dev_bound_kfunc_id)
    "bpf_xdp_metadata_rx_timestamp": KfuncProto((_CTX, P(KArg.MEM, 8)), metadata=True),
    "bpf_xdp_metadata_rx_hash": KfuncProto((_CTX, P(KArg.MEM, 4), P(KArg.MEM, 4)),
                                           metadata=True),
    "bpf_xdp_metadata_rx_vlan_tag": KfuncProto((_CTX, P(KArg.MEM, 2), P(KArg.MEM, 2)),
                                               metadata=True),
    # net/core/filter.c: bpf_kfunc_check_set_xdp
    "bpf_dynptr_from_xdp": KfuncProto((_CTX, P(KArg.SCALAR), P(KArg.DYNPTR_UNINIT))),
    "bpf_xdp_pull_data": KfuncProto((_CTX, _U32), pkt_data=True),
    # kernel/bpf/helpers.c: common_btf_ids (every program type)
    "bpf_dynptr_slice": KfuncProto((_DYN, _U32, P(KArg.MEM_SIZE, optional=True,
                                                   const_size=True), _U32), KRet.SLICE,
                                   KF_RET_NULL),
    "bpf_dynptr_slice_rdwr": KfuncProto((_DYN, _U32, P(KArg.MEM_SIZE, optional=True,
                                                        const_size=True), _U32),
                                        KRet.SLICE_RDWR,
                                        KF_RET_NULL),
    "bpf_dynptr_size": KfuncProto((_DYN,)),
    "bpf_dynptr_is_null": KfuncProto((_DYN,)),
    "bpf_dynptr_is_rdonly": KfuncProto((_DYN,)),
    "bpf_dynptr_adjust": KfuncProto((_DYN, _U32, _U32)),
    "bpf_dynptr_clone": KfuncProto((_DYN, P(KArg.DYNPTR_UNINIT))),
    "bpf_dynptr_copy": KfuncProto((_DYN, _U32, _DYN, _U32, _U32)),
    "bpf_dynptr_memset": KfuncProto((_DYN, _U32, _U32, P(KArg.SCALAR))),
    # kernel/bpf/bpf_iter.c: the numbers iterator, open-coded (bpf_for, bpf_repeat)
    "bpf_iter_num_new": KfuncProto((P(KArg.ITER, 8, "num"), _U32, _U32), flags=KF_ITER_NEW),
    "bpf_iter_num_next": KfuncProto((P(KArg.ITER, 8, "num"),), KRet.RDONLY_MEM,
                                    KF_ITER_NEXT | KF_RET_NULL, ret_size=4),
    "bpf_iter_num_destroy": KfuncProto((P(KArg.ITER, 8, "num"),), KRet.VOID, KF_ITER_DESTROY),
    # kernel/bpf/helpers.c: common_btf_ids; the XDP kernel context is struct xdp_buff
    "bpf_cast_to_kern_ctx": KfuncProto((_CTX,), KRet.KERN_CTX, ret_struct="xdp_buff"),
    "bpf_rdonly_cast": KfuncProto((P(KArg.IGN), P(KArg.CONST)), KRet.RDONLY_CAST),
    # kernel/bpf/helpers.c: the bits iterator (common_btf_ids)
    "bpf_iter_bits_new": KfuncProto((P(KArg.ITER, 16, "bits"), P(KArg.IGN), _U32),
                                    flags=KF_ITER_NEW),
    "bpf_iter_bits_next": KfuncProto((P(KArg.ITER, 16, "bits"),), KRet.RDONLY_MEM,
                                     KF_ITER_NEXT | KF_RET_NULL, ret_size=4),
    "bpf_iter_bits_destroy": KfuncProto((P(KArg.ITER, 16, "bits"),), KRet.VOID,
                                        KF_ITER_DESTROY),
    # kernel/bpf/helpers.c: RCU read sections and preemption (common_btf_ids; the
    # verifier pairs the calls)
    "bpf_rcu_read_lock": KfuncProto((), KRet.VOID),
    "bpf_rcu_read_unlock": KfuncProto((), KRet.VOID),
    "bpf_preempt_disable": KfuncProto((), KRet.VOID),
    "bpf_preempt_enable": KfuncProto((), KRet.VOID),
    # kernel/bpf/helpers.c: local IRQ state saved into a stack slot and restored from it
    # (common_btf_ids; the verifier pairs them, last saved first restored)
    "bpf_local_irq_save": KfuncProto((P(KArg.IRQ_FLAG),), KRet.VOID),
    "bpf_local_irq_restore": KfuncProto((P(KArg.IRQ_FLAG),), KRet.VOID),
    # kernel/bpf/helpers.c: resilient queued spin locks in map values (common_btf_ids); a
    # lock's int is 0 when it is taken, -EDEADLK or -ETIMEDOUT when not, and the _irqsave
    # pair saves IRQ state into a stack slot as bpf_local_irq_save does
    "bpf_res_spin_lock": KfuncProto((P(KArg.RES_SPIN_LOCK),)),
    "bpf_res_spin_unlock": KfuncProto((P(KArg.RES_SPIN_LOCK),), KRet.VOID),
    "bpf_res_spin_lock_irqsave": KfuncProto((P(KArg.RES_SPIN_LOCK), P(KArg.IRQ_FLAG))),
    "bpf_res_spin_unlock_irqrestore": KfuncProto((P(KArg.RES_SPIN_LOCK), P(KArg.IRQ_FLAG)),
                                                 KRet.VOID),
    # kernel/bpf/helpers.c: the string kfuncs (common_btf_ids); every string is __ign
    "bpf_strcmp": KfuncProto((_IGN, _IGN)),
    "bpf_strcasecmp": KfuncProto((_IGN, _IGN)),
    "bpf_strchr": KfuncProto((_IGN, _U32)),
    "bpf_strchrnul": KfuncProto((_IGN, _U32)),
    "bpf_strnchr": KfuncProto((_IGN, _U32, _U32)),
    "bpf_strrchr": KfuncProto((_IGN, _U32)),
    "bpf_strlen": KfuncProto((_IGN,)),
    "bpf_strnlen": KfuncProto((_IGN, _U32)),
    "bpf_strspn": KfuncProto((_IGN, _IGN)),
    "bpf_strcspn": KfuncProto((_IGN, _IGN)),
    "bpf_strstr": KfuncProto((_IGN, _IGN)),
    "bpf_strnstr": KfuncProto((_IGN, _IGN, _U32)),
    # kernel/bpf/helpers.c: program-allocated objects (generic_btf_ids, XDP among them)
    "bpf_obj_new_impl": KfuncProto((P(KArg.CONST), _IGN), KRet.OBJ_NEW,
                                   KF_ACQUIRE | KF_RET_NULL),
    "bpf_obj_drop_impl": KfuncProto((P(KArg.ALLOC), _IGN), KRet.VOID, KF_RELEASE),
    "bpf_refcount_acquire_impl": KfuncProto((P(KArg.REFCOUNTED), _IGN), KRet.REFCOUNTED,
                                            KF_ACQUIRE | KF_RET_NULL | KF_RCU),
    # kernel/bpf/helpers.c: the BPF linked list (generic_btf_ids); off is the node's offset
    # in its struct, which the verifier writes itself
    "bpf_list_push_front_impl": KfuncProto((P(KArg.LIST_HEAD), P(KArg.LIST_NODE), _IGN, _U32)),
    "bpf_list_push_back_impl": KfuncProto((P(KArg.LIST_HEAD), P(KArg.LIST_NODE), _IGN, _U32)),
    "bpf_list_pop_front": KfuncProto((P(KArg.LIST_HEAD),), KRet.GRAPH_NODE,
                                     KF_ACQUIRE | KF_RET_NULL),
    "bpf_list_pop_back": KfuncProto((P(KArg.LIST_HEAD),), KRet.GRAPH_NODE,
                                    KF_ACQUIRE | KF_RET_NULL),
    "bpf_list_front": KfuncProto((P(KArg.LIST_HEAD),), KRet.GRAPH_NODE_NON_OWN, KF_RET_NULL),
    "bpf_list_back": KfuncProto((P(KArg.LIST_HEAD),), KRet.GRAPH_NODE_NON_OWN, KF_RET_NULL),
    # kernel/bpf/helpers.c: the BPF red-black tree (generic_btf_ids); the add's less is
    # a static function of the program the kfunc calls (a callback verified as such),
    # off the node's offset in its struct, which the verifier writes itself
    "bpf_rbtree_add_impl": KfuncProto((P(KArg.RB_ROOT), P(KArg.RB_NODE), P(KArg.CALLBACK),
                                       _IGN, _U32)),
    "bpf_rbtree_remove": KfuncProto((P(KArg.RB_ROOT), P(KArg.RB_NODE)), KRet.GRAPH_NODE,
                                    KF_ACQUIRE | KF_RET_NULL),
    "bpf_rbtree_first": KfuncProto((P(KArg.RB_ROOT),), KRet.GRAPH_NODE_NON_OWN, KF_RET_NULL),
    "bpf_rbtree_root": KfuncProto((P(KArg.RB_ROOT),), KRet.GRAPH_NODE_NON_OWN, KF_RET_NULL),
    "bpf_rbtree_left": KfuncProto((P(KArg.RB_ROOT), P(KArg.RB_NODE)), KRet.GRAPH_NODE_NON_OWN,
                                  KF_RET_NULL),
    "bpf_rbtree_right": KfuncProto((P(KArg.RB_ROOT), P(KArg.RB_NODE)), KRet.GRAPH_NODE_NON_OWN,
                                   KF_RET_NULL),
    "bpf_percpu_obj_new_impl": KfuncProto((P(KArg.CONST), _IGN), KRet.PERCPU_OBJ_NEW,
                                          KF_ACQUIRE | KF_RET_NULL),
    "bpf_percpu_obj_drop_impl": KfuncProto((P(KArg.ALLOC), _IGN), KRet.VOID, KF_RELEASE),
    # kernel/bpf/helpers.c: BPF exceptions (common_btf_ids): bpf_throw(cookie) ends the
    # program, whose return value is the cookie (the default exception callback)
    "bpf_throw": KfuncProto((P(KArg.SCALAR),), KRet.VOID),
    # kernel/bpf/helpers.c: the bpf_wq kfuncs (common_btf_ids); flags are checked when
    # they run (-EINVAL), aux__prog is the program the verifier passes
    "bpf_wq_init": KfuncProto((P(KArg.WORKQUEUE), P(KArg.MAP), _U32)),
    "bpf_wq_set_callback_impl": KfuncProto((P(KArg.WORKQUEUE), P(KArg.CALLBACK), _U32, _IGN),
                                           async_cb=True),
    "bpf_wq_start": KfuncProto((P(KArg.WORKQUEUE), _U32)),
    # kernel/bpf/helpers.c (common_btf_ids): callbacks run in a task's context on its way
    # back to user space; aux__prog is the program the verifier passes
    "bpf_task_work_schedule_signal_impl": KfuncProto(
        (_TASK, P(KArg.TASK_WORK), P(KArg.MAP), P(KArg.CALLBACK), _IGN), flags=KF_TRUSTED_ARGS,
        async_cb=True),
    "bpf_task_work_schedule_resume_impl": KfuncProto(
        (_TASK, P(KArg.TASK_WORK), P(KArg.MAP), P(KArg.CALLBACK), _IGN), flags=KF_TRUSTED_ARGS,
        async_cb=True),
    # kernel/bpf/stream.c (common_btf_ids): print into the program's stdout or stderr;
    # args and len__sz a memory, size pair, aux__prog the program the verifier passes
    "bpf_stream_vprintk_impl": KfuncProto((_U32, P(KArg.CONST_STR), P(KArg.MEM_SIZE), _IGN),
                                          flags=KF_TRUSTED_ARGS),
    # kernel/trace/bpf_trace.c (common_btf_ids): read kernel (user) memory into a dynptr at an
    # offset; the source is __ign, the kfunc reads it without faulting
    "bpf_probe_read_kernel_dynptr": KfuncProto((_DYN, _U32, _U32, _IGN)),
    "bpf_probe_read_kernel_str_dynptr": KfuncProto((_DYN, _U32, _U32, _IGN)),
    "bpf_probe_read_user_dynptr": KfuncProto((_DYN, _U32, _U32, _IGN)),
    "bpf_probe_read_user_str_dynptr": KfuncProto((_DYN, _U32, _U32, _IGN)),
    # kernel/bpf/map_iter.c: bpf_map_iter_kfunc_ids (every program type); the map is a
    # map pointer (reg2btf_ids: CONST_PTR_TO_MAP is a trusted struct bpf_map)
    "bpf_map_sum_elem_count": KfuncProto((P(KArg.BTF_ID, struct="bpf_map"),),
                                         flags=KF_TRUSTED_ARGS),
    # net/bpf/test_run.c: bpf_test_modify_return_ids (registered for every program type
    # on 6.18): fires the bpf_trigger_tp tracepoint and returns its int
    "bpf_modify_return_test_tp": KfuncProto((_U32,)),
    # kernel/bpf/helpers.c: tasks and cgroups (generic_btf_ids); a KF_RCU argument is a
    # trusted pointer or an RCU one (a field of RCU_FIELDS read from one)
    "bpf_task_from_pid": KfuncProto((_U32,), KRet.BTF_ID, KF_ACQUIRE | KF_RET_NULL,
                                    ret_struct="task_struct"),
    "bpf_task_from_vpid": KfuncProto((_U32,), KRet.BTF_ID, KF_ACQUIRE | KF_RET_NULL,
                                     ret_struct="task_struct"),
    "bpf_task_acquire": KfuncProto((_TASK,), KRet.BTF_ID, KF_ACQUIRE | KF_RCU | KF_RET_NULL,
                                   ret_struct="task_struct"),
    "bpf_task_release": KfuncProto((_TASK,), KRet.VOID, KF_RELEASE),
    "bpf_cgroup_from_id": KfuncProto((_U32,), KRet.BTF_ID, KF_ACQUIRE | KF_RET_NULL,
                                     ret_struct="cgroup"),
    "bpf_cgroup_acquire": KfuncProto((_CGRP,), KRet.BTF_ID, KF_ACQUIRE | KF_RCU | KF_RET_NULL,
                                     ret_struct="cgroup"),
    "bpf_cgroup_release": KfuncProto((_CGRP,), KRet.VOID, KF_RELEASE),
    "bpf_cgroup_ancestor": KfuncProto((_CGRP, _U32), KRet.BTF_ID,
                                      KF_ACQUIRE | KF_RCU | KF_RET_NULL, ret_struct="cgroup"),
    "bpf_task_under_cgroup": KfuncProto((_TASK, _CGRP), flags=KF_RCU),
    "bpf_task_get_cgroup1": KfuncProto((_TASK, _U32), KRet.BTF_ID,
                                       KF_ACQUIRE | KF_RCU | KF_RET_NULL, ret_struct="cgroup"),
    # kernel/bpf/crypto.c: crypt_kfunc_btf_ids (registered for XDP; the context's life
    # cycle, crypt_init_kfunc_btf_ids, is for syscall programs only): a trusted or RCU
    # context, the source and destination dynptrs, the IV's or NULL (``siv__nullable``)
    "bpf_crypto_encrypt": KfuncProto((_CRYPTO, _DYN, _DYN, P(KArg.DYNPTR, optional=True)),
                                     flags=KF_RCU),
    "bpf_crypto_decrypt": KfuncProto((_CRYPTO, _DYN, _DYN, P(KArg.DYNPTR, optional=True)),
                                     flags=KF_RCU),
    # crypt_init_kfunc_btf_ids (syscall programs only): the params by pointer and size
    # (params__sz: the MEM_SIZE's second argument, its slot here never visited), the
    # error code's int by pointer; a context's references
    "bpf_crypto_ctx_create": KfuncProto((P(KArg.MEM_SIZE), _U32, P(KArg.MEM, size=4)),
                                        KRet.BTF_ID,
                                        KF_ACQUIRE | KF_RET_NULL, ret_struct="bpf_crypto_ctx"),
    "bpf_crypto_ctx_acquire": KfuncProto((_CRYPTO,), KRet.BTF_ID,
                                         KF_ACQUIRE | KF_RCU | KF_RET_NULL,
                                         ret_struct="bpf_crypto_ctx"),
    "bpf_crypto_ctx_release": KfuncProto((_CRYPTO,), KRet.VOID, KF_RELEASE),
    # kernel/bpf/helpers.c: a system keyring by id (generic_btf_ids); the kfunc allocates a
    # struct bpf_key, bpf_key_put frees it
    "bpf_lookup_system_key": KfuncProto((P(KArg.SCALAR),), KRet.BTF_ID,
                                        KF_ACQUIRE | KF_RET_NULL, ret_struct="bpf_key"),
    "bpf_key_put": KfuncProto((P(KArg.BTF_ID, struct="bpf_key"),), KRet.VOID, KF_RELEASE),
    # mm/slab_common.c: the slab cache of an address (common_btf_ids)
    "bpf_get_kmem_cache": KfuncProto((P(KArg.SCALAR),), KRet.BTF_ID_UNTRUSTED,
                                     ret_struct="kmem_cache"),
    # fs/bpf_fs_kfuncs.c: bpf_fs_kfunc_set (XDP among others): a cgroup's user.* xattr
    # into a dynptr
    "bpf_cgroup_read_xattr": KfuncProto((_CGRP, P(KArg.CONST_STR), _DYN), flags=KF_RCU),
    # kernel/trace/bpf_trace.c: a signal to a task (common_btf_ids)
    "bpf_send_signal_task": KfuncProto((_TASK, _U32, _U32, P(KArg.SCALAR)),
                                       flags=KF_TRUSTED_ARGS),
    # kernel/bpf/task_iter.c: the tasks, open-coded (common_btf_ids); KF_RCU_PROTECTED: the
    # iterator and the tasks it gives are RCU pointers, untrusted after bpf_rcu_read_unlock
    "bpf_iter_task_new": KfuncProto((P(KArg.ITER, 24, "task"),
                                     P(KArg.BTF_ID, struct="task_struct", optional=True), _U32),
                                    flags=KF_ITER_NEW | KF_TRUSTED_ARGS | KF_RCU_PROTECTED),
    "bpf_iter_task_next": KfuncProto((P(KArg.ITER, 24, "task"),), KRet.BTF_ID,
                                     KF_ITER_NEXT | KF_RET_NULL | KF_RCU_PROTECTED,
                                     ret_struct="task_struct"),
    "bpf_iter_task_destroy": KfuncProto((P(KArg.ITER, 24, "task"),), KRet.VOID,
                                        KF_ITER_DESTROY),
    # kernel/bpf/task_iter.c: a task's VMAs, open-coded (common_btf_ids); the task a trusted or
    # RCU one; the VMAs trusted pointers (the iterator holds the mmap lock)
    "bpf_iter_task_vma_new": KfuncProto((P(KArg.ITER, 8, "task_vma"), _TASK, _U32),
                                        flags=KF_ITER_NEW | KF_RCU),
    "bpf_iter_task_vma_next": KfuncProto((P(KArg.ITER, 8, "task_vma"),), KRet.BTF_ID,
                                         KF_ITER_NEXT | KF_RET_NULL,
                                         ret_struct="vm_area_struct"),
    "bpf_iter_task_vma_destroy": KfuncProto((P(KArg.ITER, 8, "task_vma"),), KRet.VOID,
                                            KF_ITER_DESTROY),
    # kernel/bpf/task_iter.c: the css iterator (common_btf_ids): a cgroup's descendants
    # (pre- or post-order) or its ancestors, RCU pointers
    "bpf_iter_css_new": KfuncProto((P(KArg.ITER, 24, "css"),
                                    P(KArg.BTF_ID, struct="cgroup_subsys_state"), _U32),
                                   flags=KF_ITER_NEW | KF_TRUSTED_ARGS | KF_RCU_PROTECTED),
    "bpf_iter_css_next": KfuncProto((P(KArg.ITER, 24, "css"),), KRet.BTF_ID,
                                    KF_ITER_NEXT | KF_RET_NULL | KF_RCU_PROTECTED,
                                    ret_struct="cgroup_subsys_state"),
    "bpf_iter_css_destroy": KfuncProto((P(KArg.ITER, 24, "css"),), KRet.VOID, KF_ITER_DESTROY),
    # kernel/bpf/task_iter.c: a cgroup's tasks, open-coded (common_btf_ids); check_kfunc_args
    # refuses the _new call outside LSM, iterator and sleepable programs, so no XDP program
    # gets an initialised iterator for _next and _destroy
    "bpf_iter_css_task_new": KfuncProto((P(KArg.ITER, 8, "css_task"),
                                         P(KArg.BTF_ID, struct="cgroup_subsys_state"), _U32),
                                        flags=KF_ITER_NEW | KF_TRUSTED_ARGS),
    "bpf_iter_css_task_next": KfuncProto((P(KArg.ITER, 8, "css_task"),), KRet.BTF_ID,
                                         KF_ITER_NEXT | KF_RET_NULL, ret_struct="task_struct"),
    "bpf_iter_css_task_destroy": KfuncProto((P(KArg.ITER, 8, "css_task"),), KRet.VOID,
                                            KF_ITER_DESTROY),
    # net/netfilter/nf_conntrack_bpf.c: nf_ct_kfunc_set (XDP and TC)
    # (the bpf_tuple and its size, the opts and theirs)
    "bpf_xdp_ct_lookup": KfuncProto((_CTX, P(KArg.MEM_SIZE), _U32, P(KArg.MEM_SIZE), _U32),
                                    KRet.BTF_ID, KF_ACQUIRE | KF_RET_NULL, ret_struct="nf_conn"),
    "bpf_xdp_ct_alloc": KfuncProto((_CTX, P(KArg.MEM_SIZE), _U32, P(KArg.MEM_SIZE), _U32),
                                   KRet.BTF_ID, KF_ACQUIRE | KF_RET_NULL,
                                   ret_struct="nf_conn___init"),
    "bpf_ct_insert_entry": KfuncProto((P(KArg.BTF_ID, struct="nf_conn___init"),), KRet.BTF_ID,
                                      KF_ACQUIRE | KF_RET_NULL | KF_RELEASE,
                                      ret_struct="nf_conn"),
    "bpf_ct_release": KfuncProto((P(KArg.BTF_ID, struct="nf_conn"),), KRet.VOID, KF_RELEASE),
    # the TC pair, in the same set: their context is a struct __sk_buff, which an XDP
    # program never holds trusted (see the verifier's _SKB_CTX)
    "bpf_skb_ct_lookup": KfuncProto((P(KArg.BTF_ID, struct="__sk_buff"), P(KArg.MEM_SIZE),
                                     _U32, P(KArg.MEM_SIZE), _U32), KRet.BTF_ID,
                                    KF_ACQUIRE | KF_RET_NULL | KF_TRUSTED_ARGS,
                                    ret_struct="nf_conn"),
    "bpf_skb_ct_alloc": KfuncProto((P(KArg.BTF_ID, struct="__sk_buff"), P(KArg.MEM_SIZE),
                                    _U32, P(KArg.MEM_SIZE), _U32), KRet.BTF_ID,
                                   KF_ACQUIRE | KF_RET_NULL | KF_TRUSTED_ARGS,
                                   ret_struct="nf_conn___init"),
    "bpf_ct_set_timeout": KfuncProto((P(KArg.BTF_ID, struct="nf_conn___init"), _U32),
                                     KRet.VOID, KF_TRUSTED_ARGS),
    "bpf_ct_change_timeout": KfuncProto((P(KArg.BTF_ID, struct="nf_conn"), _U32),
                                        flags=KF_TRUSTED_ARGS),
    "bpf_ct_set_status": KfuncProto((P(KArg.BTF_ID, struct="nf_conn___init"), _U32),
                                    flags=KF_TRUSTED_ARGS),
    "bpf_ct_change_status": KfuncProto((P(KArg.BTF_ID, struct="nf_conn"), _U32),
                                       flags=KF_TRUSTED_ARGS),
    # net/xfrm/xfrm_state_bpf.c: xfrm_state_kfunc_set (XDP)
    "bpf_xdp_get_xfrm_state": KfuncProto((_CTX, P(KArg.MEM_SIZE)), KRet.BTF_ID,
                                         KF_ACQUIRE | KF_RET_NULL, ret_struct="xfrm_state"),
    "bpf_xdp_xfrm_state_release": KfuncProto((P(KArg.BTF_ID, struct="xfrm_state"),),
                                             KRet.VOID, KF_RELEASE),
    # net/netfilter/nf_flow_table_bpf.c: nf_ft_kfunc_set (XDP); fib_tuple and opts are
    # structs of scalars (memory of their size: opts_len carries no __sz suffix), the
    # result a plain (neither referenced nor trusted) pointer into the flowtable
    "bpf_xdp_flow_lookup": KfuncProto((_CTX, P(KArg.MEM, 64), P(KArg.MEM, 4), _U32),
                                      KRet.BTF_ID, KF_TRUSTED_ARGS | KF_RET_NULL,
                                      ret_struct="flow_offload_tuple_rhash"),
    # net/netfilter/nf_nat_bpf.c: nf_nat_kfunc_set (XDP and TC); addr is a union
    # nf_inet_addr, a struct of scalars: 16 bytes of memory
    "bpf_ct_set_nat_info": KfuncProto((P(KArg.BTF_ID, struct="nf_conn___init"),
                                       P(KArg.MEM, 16), _U32, _U32), flags=KF_TRUSTED_ARGS),
}

# kernel/bpf/verifier.c BTF_TYPE_SAFE_RCU: pointer members that, read from a trusted or
# RCU pointer inside an RCU read section (always, for a non-sleepable program outside
# bpf_rcu_read_unlock), give an RCU pointer (MEM_RCU, never NULL) that KF_RCU kfuncs take.
RCU_FIELDS: dict[str, frozenset[str]] = {
    "task_struct": frozenset({"cpus_ptr", "cgroups", "real_parent", "group_leader"}),
    "cgroup": frozenset({"kn"}),
    "css_set": frozenset({"dfl_cgrp"}),
    "cgroup_subsys_state": frozenset({"cgroup"}),
}

# check_css_task_iter_allowlist: the iterator XDP programs may not make
CSS_TASK_ITER = "css_task"

METADATA_KFUNCS = frozenset(n for n, p in KFUNCS.items() if p.metadata)

# KF_SLEEPABLE kfuncs of the sets XDP may name (kernel/bpf/helpers.c common_btf_ids and
# generic_btf_ids, kernel/bpf/arena.c, kernel/bpf/dmabuf_iter.c, kernel/bpf/kmem_cache_iter.c,
# kernel/trace/bpf_trace.c key_sig_kfunc_set): an XDP program is never sleepable, so
# check_kfunc_call refuses every call of one that the walk reaches, before its arguments.
SLEEPABLE_KFUNCS = frozenset({
    "bpf_arena_alloc_pages", "bpf_arena_free_pages", "bpf_arena_reserve_pages",
    "bpf_copy_from_user_dynptr", "bpf_copy_from_user_str", "bpf_copy_from_user_str_dynptr",
    "bpf_copy_from_user_task_dynptr", "bpf_copy_from_user_task_str",
    "bpf_copy_from_user_task_str_dynptr",
    "bpf_iter_dmabuf_new", "bpf_iter_dmabuf_next", "bpf_iter_dmabuf_destroy",
    "bpf_iter_kmem_cache_new", "bpf_iter_kmem_cache_next", "bpf_iter_kmem_cache_destroy",
    "bpf_lookup_user_key",
})
# Linux 6.18's kfuncs (the bpf_kfunc decl tags of its BTF) that no set registered for
# BPF_PROG_TYPE_XDP holds: fetch_kfunc_meta finds no flags for an XDP program and
# check_kfunc_call refuses the call before any other check ("calling kernel function
# NAME is not allowed"). TCP congestion-control ops, cpumasks, the crypto context's
# life cycle, skb dynptrs, file/dentry/xattr (LSM), socket-op and sock_addr kfuncs,
# session cookies, cgroup rstat, PKCS#7 signatures and the kernel's own test kfuncs:
# each was called from an XDP program on this machine's 6.18 kernel, which refused it so.
# The arena's page kfuncs joined them in the 6.18 stable series (6.18.44 refuses them for
# XDP so, where earlier 6.18 kernels reached the sleepable check); they stay in
# SLEEPABLE_KFUNCS for the lock and might_sleep rules, which come first.
NOT_FOR_XDP = frozenset({
    "bpf_arena_alloc_pages", "bpf_arena_free_pages", "bpf_arena_reserve_pages",
    "bbr_cwnd_event", "bbr_init", "bbr_main", "bbr_min_tso_segs", "bbr_set_state",
    "bbr_sndbuf_expand", "bbr_ssthresh", "bbr_undo_cwnd", "bpf_cpumask_acquire",
    "bpf_cpumask_and", "bpf_cpumask_any_and_distribute", "bpf_cpumask_any_distribute",
    "bpf_cpumask_clear", "bpf_cpumask_clear_cpu", "bpf_cpumask_copy", "bpf_cpumask_create",
    "bpf_cpumask_empty", "bpf_cpumask_equal", "bpf_cpumask_first", "bpf_cpumask_first_and",
    "bpf_cpumask_first_zero", "bpf_cpumask_full", "bpf_cpumask_intersects",
    "bpf_cpumask_or", "bpf_cpumask_populate", "bpf_cpumask_release", "bpf_cpumask_set_cpu",
    "bpf_cpumask_setall", "bpf_cpumask_subset", "bpf_cpumask_test_and_clear_cpu",
    "bpf_cpumask_test_and_set_cpu", "bpf_cpumask_test_cpu", "bpf_cpumask_weight",
    "bpf_cpumask_xor", "bpf_crypto_ctx_acquire", "bpf_crypto_ctx_create",
    "bpf_crypto_ctx_release", "bpf_dynptr_from_skb", "bpf_dynptr_from_skb_meta",
    "bpf_fentry_test1", "bpf_get_dentry_xattr", "bpf_get_file_xattr",
    "bpf_get_task_exe_file", "bpf_kfunc_call_memb_release", "bpf_kfunc_call_test_release",
    "bpf_modify_return_test", "bpf_modify_return_test2", "bpf_path_d_path", "bpf_put_file",
    "bpf_remove_dentry_xattr", "bpf_session_cookie", "bpf_session_is_return",
    "bpf_set_dentry_xattr", "bpf_sk_assign_tcp_reqsk", "bpf_sock_addr_set_sun_path",
    "bpf_sock_destroy", "bpf_sock_ops_enable_tx_tstamp", "bpf_verify_pkcs7_signature",
    "css_rstat_flush", "css_rstat_updated", "cubictcp_acked", "cubictcp_cong_avoid",
    "cubictcp_cwnd_event",
    "cubictcp_init", "cubictcp_recalc_ssthresh", "cubictcp_state", "tcp_cong_avoid_ai",
    "tcp_reno_cong_avoid", "tcp_reno_ssthresh", "tcp_reno_undo_cwnd", "tcp_slow_start",
})
THROW_KFUNC = "bpf_throw"
# kernel/bpf/helpers.c: the kfunc clang emits where it proved code unreachable (an
# uninitialised variable's use); check_kfunc_call refuses a call of it that the walk reaches.
TRAP_KFUNC = "__bpf_trap"


# Kernel structs a map value's referenced __kptr field may hold: each has a destructor
# kfunc Linux 6.18 registers (register_btf_id_dtor_kfuncs: kernel/bpf/helpers.c's tasks and
# cgroups, kernel/bpf/cpumask.c, kernel/bpf/crypto.c) and is one of the verifier's
# rcu_protected_types, so a plain load of the field in an XDP program (inside an RCU read
# section) is an RCU pointer, NULL or not. An XDP program may release none of them but
# tasks and cgroups (the cpumask and crypto-context release kfuncs are not for XDP).
KERNEL_KPTRS = frozenset({"bpf_crypto_ctx", "task_struct", "cgroup", "bpf_cpumask"})
# The kernel structs with a destructor kfunc (register_btf_id_dtor_kfuncs; measured on
# 6.18: a referenced __kptr to any other kernel struct, nf_conn, sock, file..., has its
# BTF refused at BPF_BTF_LOAD with ENOENT): KERNEL_KPTRS and net/bpf/test_run.c's.
KPTR_DTORS = KERNEL_KPTRS | {"prog_test_ref_kfunc", "prog_test_member"}
# The verifier's rcu_protected_types: a referenced kptr to one of these kernel structs,
# loaded inside an RCU read section, is an RCU pointer (btf_ld_kptr_type), to any other
# kernel struct an untrusted one
RCU_PROTECTED_TYPES = frozenset({"prog_test_ref_kfunc", "cgroup", "bpf_cpumask", "task_struct",
                                 "bpf_crypto_ctx"})

# The kfuncs pyxdp's verifier checks in a SEC("syscall") program (any other there is
# UnsupportedHelper): the crypto context's life cycle.
SYSCALL_KFUNCS = frozenset({"bpf_crypto_ctx_create", "bpf_crypto_ctx_acquire",
                            "bpf_crypto_ctx_release"})
# The kfuncs pyxdp's verifier checks in a SEC("syscall") program (any other there is
# UnsupportedHelper): those, and generic ones Linux checks there as in XDP (measured):
# numbers iterators, bpf_throw, RCU, preemption and IRQ sections, and reading dynptrs
# (not bpf_dynptr_slice_rdwr: a syscall program "does not allow writes to packet data").
SYSCALL_VERIFIED_KFUNCS = SYSCALL_KFUNCS | frozenset({
    "bpf_iter_num_new", "bpf_iter_num_next", "bpf_iter_num_destroy", "bpf_throw",
    "bpf_rcu_read_lock", "bpf_rcu_read_unlock", "bpf_preempt_disable", "bpf_preempt_enable",
    "bpf_local_irq_save", "bpf_local_irq_restore", "bpf_dynptr_slice", "bpf_dynptr_adjust",
    "bpf_dynptr_is_null", "bpf_dynptr_is_rdonly", "bpf_dynptr_size", "bpf_dynptr_clone"})
# Networking kfuncs of XDP's (and tc's) kfunc sets that no syscall program may call
# (fetch_kfunc_meta: "calling kernel function ... is not allowed" where reached, measured)
NOT_FOR_SYSCALL = frozenset({
    "bpf_ct_change_status", "bpf_ct_change_timeout", "bpf_ct_insert_entry", "bpf_ct_release",
    "bpf_ct_set_nat_info", "bpf_ct_set_status", "bpf_ct_set_timeout", "bpf_dynptr_from_xdp",
    "bpf_skb_ct_alloc", "bpf_skb_ct_lookup", "bpf_xdp_ct_alloc", "bpf_xdp_ct_lookup",
    "bpf_xdp_get_xfrm_state", "bpf_xdp_xfrm_state_release", "bpf_xdp_pull_data"})


def syscall_verified(name: str) -> bool:
    """Whether pyxdp's verifier checks a call of kfunc ``name`` in a syscall program (an
    unchecked one is UnsupportedHelper): those of SYSCALL_VERIFIED_KFUNCS, and those
    Linux refuses there (NOT_FOR_SYSCALL, the XDP metadata kfuncs)."""
    proto = KFUNCS.get(name)
    return name in SYSCALL_VERIFIED_KFUNCS or name in NOT_FOR_SYSCALL or \
        (proto is not None and proto.metadata)


def register_kfunc(name: str, proto: KfuncProto) -> None:
    """Make kfunc ``name`` known to the verifier (a subsystem pyxdp adds later)."""
    KFUNCS[name] = proto
