// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * graph - what pyxdp does not model yet of BPF graphs, which Linux 6.18
 * accepts: the red-black tree (a bpf_rb_root in a map value beside its
 * bpf_spin_lock, objects holding a bpf_rb_node). pyxdp refuses both programs
 * with UnsupportedHelper (tests/test_local_kptr.py).
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/unmodelled/graph.c \
 *     -o tests/verifier_objects/unmodelled/graph.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

struct bpf_rb_root {
	__u64 __opaque[2];
} __attribute__((aligned(8)));

struct bpf_rb_node {
	__u64 __opaque[4];
} __attribute__((aligned(8)));

static long (* const bpf_spin_lock)(struct bpf_spin_lock *lock) = (void *) 93;
static long (* const bpf_spin_unlock)(struct bpf_spin_lock *lock) = (void *) 94;

extern struct bpf_rb_node *bpf_rbtree_first(struct bpf_rb_root *root) __ksym;

struct tnode {
	__u64 key;
	struct bpf_rb_node rb;
};

struct tree {
	struct bpf_spin_lock lock;
	struct bpf_rb_root root __contains(tnode, rb);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tree);
} trees SEC(".maps");

SEC("xdp")
int xdp_obj_with_rb_node(struct xdp_md *ctx)
{
	struct tnode *t = bpf_obj_new(struct tnode);

	if (!t)
		return XDP_PASS;
	bpf_obj_drop(t);
	return XDP_PASS;
}

SEC("xdp")
int xdp_rbtree_first(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct tree *t = bpf_map_lookup_elem(&trees, &k);
	struct bpf_rb_node *n;
	__u64 key = 0;

	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&t->lock);
	n = bpf_rbtree_first(&t->root);
	if (n)
		key = container_of(n, struct tnode, rb)->key;
	bpf_spin_unlock(&t->lock);
	return key ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
