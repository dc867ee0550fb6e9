// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * graph - what pyxdp does not model yet of program-allocated objects, which
 * Linux 6.18 accepts: a refcounted object (one holding a bpf_refcount, which
 * may be on a list and held by the program at once). pyxdp refuses it with
 * UnsupportedHelper (tests/test_local_kptr.py).
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/unmodelled/graph.c \
 *     -o tests/verifier_objects/unmodelled/graph.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

struct bpf_refcount {
	__u32 __opaque[1];
} __attribute__((aligned(4)));

struct counted {
	__u64 v;
	struct bpf_list_node node;
	struct bpf_refcount ref;
};

__u64 made;	/* global data: the object's BTF goes to Linux with its map */

SEC("xdp")
int xdp_obj_refcounted(struct xdp_md *ctx)
{
	struct counted *c = bpf_obj_new(struct counted);

	if (!c)
		return XDP_PASS;
	made++;
	bpf_obj_drop(c);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
