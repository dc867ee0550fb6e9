// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * loops - the loops Linux verifies until their states converge, as clang
 * emits them: bpf_for (the numbers iterator: bpf_iter_num_new/next/destroy),
 * can_loop (may_goto, spelled in bytes as bpf_experimental.h does for a
 * compiler without the mnemonic) and bpf_loop callbacks. Each program's
 * Linux 6.18 verdict is recorded in tests/test_verifier.py.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/loops.c -o tests/verifier_objects/loops.o
 */
#include <stdbool.h>
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))

struct bpf_iter_num {
	__u64 __opaque[1];
} __attribute__((aligned(8)));

extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;

/* bpf_for of libbpf's bpf_helpers.h */
#define bpf_for(i, start, end) for (						\
	struct bpf_iter_num ___it __attribute__((aligned(8),			\
						 cleanup(bpf_iter_num_destroy))),	\
	*___p __attribute__((unused)) = (					\
		bpf_iter_num_new(&___it, (start), (end)),			\
		(void)bpf_iter_num_destroy, (void *)0);				\
	({									\
		int *___t = bpf_iter_num_next(&___it);				\
		(___t && ((i) = *___t, (i) >= (start) && (i) < (end)));		\
	});									\
)

/* can_loop of bpf_experimental.h: may_goto as bytes */
#define can_loop							\
	({ __label__ l_break, l_continue;				\
	bool ret = true;						\
	asm volatile goto("1:.byte 0xe5;				\
		      .byte 0;						\
		      .long ((%l[l_break] - 1b - 8) / 8) & 0xffff;	\
		      .short 0"						\
		      :::: l_break);					\
	goto l_continue;						\
	l_break: ret = false;						\
	l_continue:;							\
	ret;								\
	})

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} sums SEC(".maps");

/* Sums the first 64 bytes (as far as the frame goes) into sums[0]. */
SEC("xdp")
int xdp_iter_sum(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = (void *)(long)ctx->data;
	__u64 sum = 0, *v;
	__u32 k = 0;
	int i;

	bpf_for(i, 0, 64) {
		if ((void *)(p + i + 1) > data_end)
			break;
		sum += p[i];
	}
	v = bpf_map_lookup_elem(&sums, &k);
	if (v)
		*v = sum;
	return XDP_PASS;
}

/* Off by one: 64 bytes checked, 65 read (Linux refuses it). */
SEC("xdp")
int xdp_iter_off_by_one(struct xdp_md *ctx)
{
	__u8 *data_end = (void *)(long)ctx->data_end;
	__u8 *p = (void *)(long)ctx->data;
	__u64 sum = 0;
	int i;

	if (p + 64 > data_end)
		return XDP_DROP;
	bpf_for(i, 0, 65)
		sum += p[i];
	return sum & 1 ? XDP_PASS : XDP_DROP;
}

/* Adds the map's values until one is missing or the sum passes 1000. */
SEC("xdp")
int xdp_can_loop_sum(struct xdp_md *ctx)
{
	__u64 sum = 0, *v;
	__u32 k = 0;

	while (can_loop) {
		v = bpf_map_lookup_elem(&sums, &k);
		if (!v || sum > 1000)
			break;
		sum += *v;
		k = (k + 1) & 15;
	}
	return sum & 1 ? XDP_PASS : XDP_DROP;
}

struct walk {
	__u64 *slots;
	__u32 n;
};

static int step(__u32 idx, struct walk *w)
{
	if (w->n >= 16)
		return 1;
	w->slots[w->n] += idx;	/* no bound: n is precise, the 17th call reads past */
	w->n += 2;
	return 0;
}

/* bpf_loop: the callback's index into a map value grows per call; Linux
 * refuses the call that would reach past the value. */
SEC("xdp")
int xdp_loop_walk(struct xdp_md *ctx)
{
	struct walk w = { 0, 1 };
	__u32 k = 0;

	w.slots = bpf_map_lookup_elem(&sums, &k);
	if (!w.slots)
		return XDP_PASS;
	bpf_loop(32, step, &w, 0);
	return XDP_PASS;
}

static int count(__u32 idx, __u64 *acc)
{
	*acc += idx;
	return 0;
}

/* bpf_loop with a counter in the caller's stack: converges. */
SEC("xdp")
int xdp_loop_count(struct xdp_md *ctx)
{
	__u64 acc = 0;

	bpf_loop(1000, count, &acc, 0);
	return acc & 1 ? XDP_PASS : XDP_DROP;
}

static int noop(__u32 idx, void *unused)
{
	return 0;
}

/* bpf_loop, then compares of random values collected in a word nothing checks:
 * outside the callback's loop the states prune on that imprecise word as in
 * straight-line code (2^20 paths otherwise). */
SEC("xdp")
int xdp_loop_then_branches(struct xdp_md *ctx)
{
	__u64 w = 0;

	bpf_loop(4, noop, NULL, 0);
#pragma unroll
	for (int k = 0; k < 20; k++)
		if (bpf_get_prandom_u32() > 10)
			w |= 1ULL << k;
	return w + bpf_get_prandom_u32() == 12345 ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
