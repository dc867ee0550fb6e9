// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * loops2 - loops as XDP programs write them with clang-19: cond_break and
 * can_loop (the may_goto mnemonic, as bpf_experimental.h spells them for a
 * compiler that has it), bpf_for/bpf_repeat (bpf_iter_num_*), nested and in a
 * static function, and bpf_loop callbacks. Linux 6.18's verdict and walked
 * instruction count of each program are in tests/test_verifier.py
 * (tests/kernel/test_verifier_kernel.py re-measures them).
 *
 * Built with (from the repository's top directory):
 *   clang-19 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v4 \
 *     -c tests/verifier_objects/loops2.c -o tests/verifier_objects/loops2.o
 */
#include <stdbool.h>
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))
struct bpf_iter_num { __u64 __opaque[1]; } __attribute__((aligned(8)));
extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;

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
#define bpf_repeat(N) for (							\
	struct bpf_iter_num ___it __attribute__((aligned(8),			\
						 cleanup(bpf_iter_num_destroy))),	\
	*___p __attribute__((unused)) = (					\
		bpf_iter_num_new(&___it, 0, (N)),				\
		(void)bpf_iter_num_destroy, (void *)0);				\
	bpf_iter_num_next(&___it);						\
)

#define __cond_break(expr)						\
	({ __label__ l_break, l_continue;				\
	asm volatile goto("may_goto %l[l_break]"			\
		      :::: l_break);					\
	goto l_continue;						\
	l_break: expr;							\
	l_continue:;							\
	})
#define cond_break __cond_break(break)
#define can_loop							\
	({ __label__ l_break, l_continue;				\
	bool ret = true;						\
	asm volatile goto("may_goto %l[l_break]"			\
		      :::: l_break);					\
	goto l_continue;						\
	l_break: ret = false;						\
	l_continue:;							\
	ret;								\
	})

struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 64);
	 __type(key, __u32); __type(value, __u64); } vals SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 64);
	 __type(key, __u32); __type(value, __u32); } counts SEC(".maps");
struct cfg { __u32 n; __u32 ports[16]; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1);
	 __type(key, __u32); __type(value, struct cfg); } conf SEC(".maps");

/* 2: bpf_for over an array map */
SEC("xdp")
int it_map_sum(struct xdp_md *ctx)
{
	__u64 sum = 0, *v;
	int i;
	__u32 k0 = 0;
	bpf_for(i, 0, 64) {
		__u32 k = i;
		v = bpf_map_lookup_elem(&vals, &k);
		if (!v)
			continue;
		sum += *v;
	}
	v = bpf_map_lookup_elem(&vals, &k0);
	if (v)
		*v = sum;
	return XDP_PASS;
}

/* 3: bpf_repeat with a stack counter */
SEC("xdp")
int it_repeat(struct xdp_md *ctx)
{
	__u32 k = 0, *c;
	int n = 0;
	bpf_repeat(10) {
		n++;
		if (n > 5)
			break;
	}
	k = n;
	c = bpf_map_lookup_elem(&counts, &k);
	if (c)
		*c += 1;
	return XDP_PASS;
}

/* 4: nested bpf_for */
SEC("xdp")
int it_nested(struct xdp_md *ctx)
{
	__u64 acc = 0, *v;
	int i, j;
	__u32 k = 1;
	bpf_for(i, 0, 4) {
		bpf_for(j, 0, 5) {
			acc += i * j;
		}
	}
	v = bpf_map_lookup_elem(&vals, &k);
	if (v)
		*v = acc;
	return XDP_PASS;
}

/* 5: can_loop with a map lookup per iteration */
SEC("xdp")
int cl_chase(struct xdp_md *ctx)
{
	__u32 k = 0, *n;
	int steps = 0;
	while (can_loop) {
		n = bpf_map_lookup_elem(&counts, &k);
		if (!n)
			break;
		k = *n;
		steps++;
	}
	return steps & 1 ? XDP_DROP : XDP_PASS;
}

/* 6: bpf_loop, callback reads a map and stops early */
struct lctx { __u64 sum; __u32 limit; };
static long lcb(__u32 idx, struct lctx *c)
{
	__u32 k = idx;
	__u64 *v = bpf_map_lookup_elem(&vals, &k);
	if (!v)
		return 1;
	c->sum += *v;
	if (c->sum > c->limit)
		return 1;
	return 0;
}
SEC("xdp")
int bl_sum(struct xdp_md *ctx)
{
	struct lctx c = { .sum = 0, .limit = 1000 };
	bpf_loop(64, lcb, &c, 0);
	return c.sum > 10 ? XDP_DROP : XDP_PASS;
}

/* 7: cond_break inside bpf_for */
SEC("xdp")
int it_cond_break(struct xdp_md *ctx)
{
	__u64 acc = 0, *v;
	int i;
	__u32 k = 2;
	bpf_for(i, 0, 100) {
		cond_break;
		acc ^= i;
	}
	v = bpf_map_lookup_elem(&vals, &k);
	if (v)
		*v = acc;
	return XDP_PASS;
}

/* 8: can_loop scanning packet bytes */
SEC("xdp")
int cl_scan(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 zeros = 0;
	while (can_loop) {
		if (p + 1 > end)
			break;
		if (*p == 0)
			zeros++;
		p++;
	}
	return zeros > 3 ? XDP_DROP : XDP_PASS;
}

/* 9: bpf_for with a bound from a map value */
SEC("xdp")
int it_map_bound(struct xdp_md *ctx)
{
	__u32 k = 0, hits = 0;
	struct cfg *c = bpf_map_lookup_elem(&conf, &k);
	int i;
	if (!c)
		return XDP_PASS;
	bpf_for(i, 0, c->n) {
		if (i >= 16)
			break;
		if (c->ports[i] == 80)
			hits++;
	}
	return hits ? XDP_DROP : XDP_PASS;
}

/* 10: may_goto loop in a static subprogram */
static __attribute__((noinline)) int count_bits(__u64 x)
{
	int n = 0;
	while (x && can_loop) {
		n += x & 1;
		x >>= 1;
	}
	return n;
}
SEC("xdp")
int cl_subprog(struct xdp_md *ctx)
{
	__u64 x = bpf_get_prandom_u32();
	return count_bits(x) > 16 ? XDP_DROP : XDP_PASS;
}

/* 11: bpf_for over the first 32 packet bytes */
SEC("xdp")
int it_pkt(struct xdp_md *ctx)
{
	__u8 *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 csum = 0;
	int i;
	bpf_for(i, 0, 32) {
		if (data + i + 1 > end)
			break;
		csum += data[i];
	}
	return csum & 1 ? XDP_DROP : XDP_PASS;
}

/* 12: bpf_loop callback with nested cond_break */
static long lcb2(__u32 idx, __u64 *acc)
{
	for (int j = 0; j < 8; j++) {
		cond_break;
		*acc += idx ^ j;
	}
	return 0;
}
SEC("xdp")
int bl_nested_cb(struct xdp_md *ctx)
{
	__u64 acc = 0;
	bpf_loop(16, lcb2, &acc, 0);
	return acc & 1 ? XDP_DROP : XDP_PASS;
}

/* 13: IPv6 extension headers with bpf_for */
SEC("xdp")
int it_ipv6_ext(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	__u8 nh;
	__u8 *p;
	int i;
	if ((void *)(ip6 + 1) > end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	nh = ip6->nexthdr;
	p = (void *)(ip6 + 1);
	bpf_for(i, 0, 6) {
		if (nh != 0 && nh != 43 && nh != 60)
			break;
		if (p + 2 > (__u8 *)end)
			return XDP_DROP;
		nh = p[0];
		p += (p[1] + 1) * 8;
	}
	return nh == 17 ? XDP_PASS : XDP_DROP;
}

/* 14: can_loop countdown with an early return */
SEC("xdp")
int cl_countdown(struct xdp_md *ctx)
{
	__u32 n = bpf_get_prandom_u32() & 0xff;
	__u32 k = 3;
	__u64 *v;
	while (n && can_loop) {
		if (n == 77)
			return XDP_DROP;
		n--;
	}
	v = bpf_map_lookup_elem(&vals, &k);
	if (v)
		*v = n;
	return XDP_PASS;
}

/* 15: an iterator over an empty range */
SEC("xdp")
int it_empty(struct xdp_md *ctx)
{
	int i, n = 0;
	bpf_for(i, 5, 5)
		n++;
	return n ? XDP_DROP : XDP_PASS;
}

LICENSE("GPL");
