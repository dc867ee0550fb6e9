// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * graph_obj_loop - a struct both a list node and a list head whose elements hold a list head
 * themselves (the ownership could form a cycle: ELOOP).
 * Linux 6.18 refuses the object's BTF (btf_parse_struct_metas,
 * btf_check_and_fixup_fields), so libbpf loads the program without it and
 * bpf_obj_new finds no program BTF; the verdict is recorded in
 * tests/test_verifier.py.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/graph_obj_loop.c -o tests/verifier_objects/graph_obj_loop.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

struct item {
	__u64 v;
	struct bpf_list_node node;
	struct bpf_spin_lock lock;
	struct bpf_list_head sub __contains(item, node);
};

struct bag {
	struct bpf_list_node node;
	struct bpf_spin_lock lock;
	struct bpf_list_head items __contains(item, node);
};

SEC("xdp")
int xdp_obj_loop(struct xdp_md *ctx)
{
	struct item *it = bpf_obj_new(struct item);
	struct bag *b;

	if (it)
		bpf_obj_drop(it);
	b = bpf_obj_new(struct bag);
	if (!b)
		return XDP_PASS;
	bpf_obj_drop(b);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
