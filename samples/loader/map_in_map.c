// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * Loader feature test: maps of maps and maps with initial values.
 *
 *   outer_array  BPF_MAP_TYPE_ARRAY_OF_MAPS, 2 slots, initialised to
 *                { inner_a, inner_b }
 *   outer_hash   BPF_MAP_TYPE_HASH_OF_MAPS, key 3 initialised to inner_b
 *   jmp          BPF_MAP_TYPE_PROG_ARRAY, slot 0 -> mim_tail_a,
 *                slot 2 -> mim_tail_b
 *
 * The inner map's shape comes from the BTF of __array(values, struct
 * inner_map): the loader creates a template map from it (the kernel wants
 * an inner_map_fd when an outer map is created). The ".values"
 * initialisers are not in the outer maps' bytes: they are relocations in
 * ".rel.maps" against the inner maps' (or programs') symbols, at the offset
 * of the values[] slot; the loader stores the fds after creating
 * everything. Programs must be loaded before the program array is filled.
 */
#include "pyxdp_bpf.h"

/* One type for both inner maps and the outer maps' template. */
struct inner_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 4);
};

struct inner_map inner_a SEC(".maps");
struct inner_map inner_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__type(key, __u32);
	__uint(max_entries, 2);
	__array(values, struct inner_map);
} outer_array SEC(".maps") = {
	.values = { &inner_a, &inner_b },
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, __u32);
	__uint(max_entries, 8);
	__array(values, struct inner_map);
} outer_hash SEC(".maps") = {
	.values = { [3] = &inner_b },
};

int mim_tail_a(struct xdp_md *ctx);
int mim_tail_b(struct xdp_md *ctx);

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(max_entries, 4);
	__array(values, int(struct xdp_md *));
} jmp SEC(".maps") = {
	.values = {
		[0] = (void *)&mim_tail_a,
		[2] = (void *)&mim_tail_b,
	},
};

/* inner[idx] += v for the map stored in outer under key. */
static __always_inline void bump(void *outer, __u32 key, __u32 idx, __u64 v)
{
	void *inner = bpf_map_lookup_elem(outer, &key);
	__u64 *slot;

	if (!inner)
		return;
	slot = bpf_map_lookup_elem(inner, &idx);
	if (slot)
		__sync_fetch_and_add(slot, v);
}

SEC("xdp")
int mim_main(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;

	bump(&outer_array, 0, 0, 1);   /* inner_a[0] */
	bump(&outer_array, 1, 1, len); /* inner_b[1] */
	bump(&outer_hash, 3, 2, 1);    /* inner_b[2] */

	/* Even lengths to slot 0, odd to slot 2. */
	bpf_tail_call(ctx, &jmp, (len & 1) ? 2 : 0);
	return XDP_ABORTED; /* empty slot */
}

SEC("xdp")
int mim_tail_a(struct xdp_md *ctx)
{
	bump(&outer_array, 0, 3, 1); /* inner_a[3] */
	return XDP_PASS;
}

SEC("xdp")
int mim_tail_b(struct xdp_md *ctx)
{
	bump(&outer_array, 1, 3, 1); /* inner_b[3] */
	return XDP_DROP;
}

LICENSE("GPL");
