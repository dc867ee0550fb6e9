// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * kfunc_refused - kfuncs Linux lets an XDP program name but refuses when the
 * walk reaches the call: sleepable ones (an XDP program never sleeps) and
 * __bpf_trap, which clang emits where an uninitialised variable made code
 * unreachable. Each program's Linux 6.18 verdict is recorded in
 * tests/test_verifier.py.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/kfunc_refused.c -o tests/verifier_objects/kfunc_refused.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

struct bpf_dynptr;

extern int bpf_copy_from_user_str(void *dst, __u32 dst__sz, const void *unsafe_ptr__ign,
				  __u64 flags) __ksym;
struct bpf_key {  /* the kernel's type by name: libbpf compares the prototypes */
	int opaque;
};

extern struct bpf_key *bpf_lookup_user_key(__s32 serial, __u64 flags) __ksym;
extern void __bpf_trap(void) __ksym;

SEC("xdp")
int xdp_copy_user(struct xdp_md *ctx)
{
	char buf[16];

	/* only long packets reach the call: the walk still does */
	if (ctx->data_end - ctx->data > 100 &&
	    bpf_copy_from_user_str(buf, sizeof(buf), (void *)(long)ctx->data, 0) > 0)
		return buf[0] ? XDP_DROP : XDP_PASS;
	return XDP_PASS;
}

SEC("xdp")
int xdp_user_key(struct xdp_md *ctx)
{
	return bpf_lookup_user_key(ctx->rx_queue_index, 0) ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_trap(struct xdp_md *ctx)
{
	if (ctx->data_end - ctx->data < 14)
		__bpf_trap();
	return XDP_PASS;
}

LICENSE("GPL");
