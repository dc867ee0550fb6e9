/* SPDX-License-Identifier: MIT */
/*
 * pyxdp_kfuncs.h - declarations of the kernel functions (kfuncs) for
 * program-allocated objects that pyxdp's samples call, in pyxdp's own words
 * (what libbpf's bpf_experimental.h declares for the same kfuncs).
 *
 * A kfunc is an extern function in section ".ksyms": clang emits a call with
 * src_reg 2 and a relocation the loader resolves by name against the
 * kernel's BTF. The argument name suffixes matter to the verifier:
 * "__k" a known constant, "__ign" not checked, "__alloc" an object
 * bpf_obj_new gave.
 */
#ifndef PYXDP_KFUNCS_H
#define PYXDP_KFUNCS_H

#include <linux/types.h>

#define __ksym __attribute__((section(".ksyms")))
/* A map value member holding a referenced pointer to an object (bpf_kptr_xchg). */
#define __kptr __attribute__((btf_type_tag("kptr")))

/* The local BTF type id of a type: a CO-RE relocation the loader resolves to
 * the program's own BTF id (bpf_core_type_id_local). */
#define pyxdp_local_type_id(type) __builtin_btf_type_id(*(type *)0, 0)

extern void *bpf_obj_new_impl(__u64 local_type_id__k, void *meta__ign) __ksym;
extern void bpf_obj_drop_impl(void *p__alloc, void *meta__ign) __ksym;

/* A zeroed object of struct type, or NULL; freed with bpf_obj_drop. */
#define bpf_obj_new(type) ((type *)bpf_obj_new_impl(pyxdp_local_type_id(type), NULL))
#define bpf_obj_drop(p) bpf_obj_drop_impl(p, NULL)

/* bpf_kptr_xchg(&value->field, p): store p in a __kptr field, return the old one. */
static void *(* const bpf_kptr_xchg)(void *dst, void *ptr) = (void *) 194;

/* The BPF linked list (kernel/bpf/helpers.c): a struct bpf_list_head in a map
 * value or global data, beside the struct bpf_spin_lock that must be held
 * for every list kfunc, holds objects of the struct and node member that
 * __contains names; the sizes are the kernel's. */
struct bpf_list_head {
	__u64 __opaque[2];
} __attribute__((aligned(8)));

struct bpf_list_node {
	__u64 __opaque[3];
} __attribute__((aligned(8)));

#define __contains(name, node) __attribute__((btf_decl_tag("contains:" #name ":" #node)))

extern int bpf_list_push_front_impl(struct bpf_list_head *head, struct bpf_list_node *node,
				    void *meta__ign, __u64 off) __ksym;
extern int bpf_list_push_back_impl(struct bpf_list_head *head, struct bpf_list_node *node,
				   void *meta__ign, __u64 off) __ksym;
extern struct bpf_list_node *bpf_list_pop_front(struct bpf_list_head *head) __ksym;
extern struct bpf_list_node *bpf_list_pop_back(struct bpf_list_head *head) __ksym;
extern struct bpf_list_node *bpf_list_front(struct bpf_list_head *head) __ksym;
extern struct bpf_list_node *bpf_list_back(struct bpf_list_head *head) __ksym;

/* Push the object's node (the list takes the object); the last argument is the
 * node's offset in the object, which the verifier sets itself. */
#define bpf_list_push_front(head, node) bpf_list_push_front_impl(head, node, NULL, 0)
#define bpf_list_push_back(head, node) bpf_list_push_back_impl(head, node, NULL, 0)
/* A reference count in an object: the object may be on a list (or two) and held by
 * the program at once; bpf_obj_drop frees it when the last reference goes. */
struct bpf_refcount {
	__u32 __opaque[1];
} __attribute__((aligned(4)));

extern void *bpf_refcount_acquire_impl(void *p__refcounted_kptr, void *meta__ign) __ksym;

/* One more reference to a refcounted object (owned, or one on a list). */
#define bpf_refcount_acquire(p) bpf_refcount_acquire_impl(p, NULL)
/* The BPF red-black tree (kernel/bpf/helpers.c): a struct bpf_rb_root in a map
 * value or global data, beside the struct bpf_spin_lock every tree kfunc needs
 * held, holds objects of the struct and node member __contains names, ordered by
 * the program's less(a, b) (bpf_rbtree_add places a left of every b it is less
 * than); the sizes are the kernel's (an rb_root_cached; an rb_node and its owner). */
struct bpf_rb_root {
	__u64 __opaque[2];
} __attribute__((aligned(8)));

struct bpf_rb_node {
	__u64 __opaque[4];
} __attribute__((aligned(8)));

extern int bpf_rbtree_add_impl(struct bpf_rb_root *root, struct bpf_rb_node *node,
			       _Bool (less)(struct bpf_rb_node *a, const struct bpf_rb_node *b),
			       void *meta__ign, __u64 off) __ksym;
extern struct bpf_rb_node *bpf_rbtree_remove(struct bpf_rb_root *root,
					     struct bpf_rb_node *node) __ksym;
extern struct bpf_rb_node *bpf_rbtree_first(struct bpf_rb_root *root) __ksym;
extern struct bpf_rb_node *bpf_rbtree_root(struct bpf_rb_root *root) __ksym;
extern struct bpf_rb_node *bpf_rbtree_left(struct bpf_rb_root *root,
					   struct bpf_rb_node *node) __ksym;
extern struct bpf_rb_node *bpf_rbtree_right(struct bpf_rb_root *root,
					    struct bpf_rb_node *node) __ksym;

/* Add the object's node (the tree takes the object); the last argument is the
 * node's offset in the object, which the verifier sets itself. */
#define bpf_rbtree_add(root, node, less) bpf_rbtree_add_impl(root, node, less, NULL, 0)
#define container_of(ptr, type, member) ((type *)((void *)(ptr) - __builtin_offsetof(type, member)))

#endif
