// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * graph - what pyxdp does not model yet of program-allocated objects, which
 * Linux 6.18 accepts: an object holding a bpf_list_node, and the list
 * kfuncs. pyxdp refuses both with UnsupportedHelper (tests/test_local_kptr.py).
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/unmodelled/graph.c \
 *     -o tests/verifier_objects/unmodelled/graph.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

struct bpf_list_node {
	__u64 __opaque[3];
} __attribute__((aligned(8)));

struct bpf_list_head {
	__u64 __opaque[2];
} __attribute__((aligned(8)));

#define __contains(name, node) __attribute__((btf_decl_tag("contains:" #name ":" #node)))
#define private(name) SEC(".bss." #name) __attribute__((aligned(8)))

static long (* const bpf_spin_lock)(struct bpf_spin_lock *lock) = (void *) 93;
static long (* const bpf_spin_unlock)(struct bpf_spin_lock *lock) = (void *) 94;

extern int bpf_list_push_front_impl(struct bpf_list_head *head, struct bpf_list_node *node,
				    void *meta__ign, __u64 off) __ksym;

struct elem {
	__u64 v;
	struct bpf_list_node node;
};

private(A) struct bpf_spin_lock glock;
private(A) struct bpf_list_head ghead __contains(elem, node);

SEC("xdp")
int xdp_obj_with_node(struct xdp_md *ctx)
{
	struct elem *e = bpf_obj_new(struct elem);

	if (!e)
		return XDP_PASS;
	bpf_obj_drop(e);
	return XDP_PASS;
}

SEC("xdp")
int xdp_list_push(struct xdp_md *ctx)
{
	struct elem *e = bpf_obj_new(struct elem);

	if (!e)
		return XDP_PASS;
	bpf_spin_lock(&glock);
	bpf_list_push_front_impl(&ghead, &e->node, NULL, 8);
	bpf_spin_unlock(&glock);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
