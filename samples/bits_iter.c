// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * bits_iter - the bits iterator kfuncs (bpf_iter_bits_new, _next, _destroy):
 * the numbers of the set bits of a memory area, in order.
 *
 * xdp_bits reads cfg[0]: where the bits are (SRC_MAP: the src map's value
 * from word cfg.off on; SRC_STACK: a copy of that on the stack; SRC_PKT: the
 * packet from byte cfg.off on, when the words fit in it; SRC_RAW: cfg.raw
 * taken as an address, any number), how many words (cfg.nr_words) and whether
 * the loop sets every bit of the 4 source words from cfg.off while it runs (cfg.mutate: the
 * iterator walks the copy new() took, so it does not see them). out[0] gets
 * new's return, out[1] the number of bits seen, out[2] their sum, out[3] a
 * hash of them in the order seen; the verdict is XDP_PASS.
 *
 * xdp_bits_nested walks the set bits of src word 0 and, for each, those of
 * src word 1 (two live iterators) and counts the pairs into out[0].
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))

struct bpf_iter_bits {
	__u64 __opaque[2];
} __attribute__((aligned(8)));

extern int bpf_iter_bits_new(struct bpf_iter_bits *it, const __u64 *unsafe_ptr__ign,
			     __u32 nr_words) __ksym;
extern int *bpf_iter_bits_next(struct bpf_iter_bits *it) __ksym;
extern void bpf_iter_bits_destroy(struct bpf_iter_bits *it) __ksym;

enum { SRC_MAP, SRC_STACK, SRC_PKT, SRC_RAW };
#define NWORDS 520
#define NOUT 4

struct cfg {
	__u32 src;
	__u32 nr_words;
	__u32 off;
	__u32 mutate;
	__u64 raw;
};

struct bits {
	__u64 w[NWORDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bits);
} src SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NOUT);
	__type(key, __u32);
	__type(value, __s64);
} out SEC(".maps");

static __always_inline void put(__u32 k, __s64 v)
{
	__s64 *slot = bpf_map_lookup_elem(&out, &k);

	if (slot)
		*slot = v;
}

SEC("xdp")
int xdp_bits(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct bpf_iter_bits it;
	__u64 stack[2] = {};
	const __u64 *p = NULL;
	__u32 zero = 0, n = 0, mutated = 0;
	struct cfg *c = bpf_map_lookup_elem(&cfg, &zero);
	struct bits *s = bpf_map_lookup_elem(&src, &zero);
	__s64 sum = 0, hash = 0;
	int *bit;
	int r;

	if (!c || !s)
		return XDP_ABORTED;
	if (c->src == SRC_MAP) {
		if (c->off < NWORDS)
			p = &s->w[c->off];
	} else if (c->src == SRC_STACK) {
		if (c->off < NWORDS - 1) {
			stack[0] = s->w[c->off];
			stack[1] = s->w[c->off + 1];
		}
		p = stack;
	} else if (c->src == SRC_PKT) {
		if (c->off < 1500 && data + c->off + (__u64)c->nr_words * 8 <= data_end)
			p = data + c->off;
	} else {
		p = (const __u64 *)c->raw;
	}
	r = bpf_iter_bits_new(&it, p, c->nr_words);
	while ((bit = bpf_iter_bits_next(&it))) {
		if (c->mutate && !mutated) {
#pragma unroll
			for (__u32 k = 0; k < 4; k++)
				if (c->off + k < NWORDS)
					s->w[c->off + k] = ~0ULL;
			stack[0] = stack[1] = ~0ULL;
			mutated = 1;
		}
		hash = hash * 31 + *bit;
		sum += *bit;
		n++;
	}
	bpf_iter_bits_destroy(&it);
	put(0, r);
	put(1, n);
	put(2, sum);
	put(3, hash);
	return XDP_PASS;
}

SEC("xdp")
int xdp_bits_nested(struct xdp_md *ctx)
{
	struct bpf_iter_bits a, b;
	__u32 zero = 0;
	struct bits *s = bpf_map_lookup_elem(&src, &zero);
	__s64 pairs = 0;
	int *i, *j;

	if (!s)
		return XDP_ABORTED;
	bpf_iter_bits_new(&a, &s->w[0], 1);
	while ((i = bpf_iter_bits_next(&a))) {
		bpf_iter_bits_new(&b, &s->w[1], 1);
		while ((j = bpf_iter_bits_next(&b)))
			pairs += *i * 64 + *j;
		bpf_iter_bits_destroy(&b);
	}
	bpf_iter_bits_destroy(&a);
	put(0, pairs);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
