// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * graph_obj_nolock - a struct holding a bpf_list_head without a bpf_spin_lock beside it.
 * Linux 6.18 refuses the object's BTF (btf_parse_struct_metas,
 * btf_check_and_fixup_fields), so libbpf loads the program without it and
 * bpf_obj_new finds no program BTF; the verdict is recorded in
 * tests/test_verifier.py.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/graph_obj_nolock.c -o tests/verifier_objects/graph_obj_nolock.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

struct item {
	__u64 v;
	struct bpf_list_node node;
};

struct bag {
	__u64 n;
	struct bpf_list_head items __contains(item, node);
};

SEC("xdp")
int xdp_obj_nolock(struct xdp_md *ctx)
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
