// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * Loader feature test: legacy map definitions.
 *
 * Before BTF-defined maps, a map was a struct bpf_map_def placed in a
 * section named "maps"; the loader reads the parameters from the section's
 * bytes, one definition per symbol (each symbol's value is its offset in
 * the section, and all definitions have the same size). libbpf 1.0 and
 * later no longer accept these, but older objects in the wild use them.
 *
 * The struct is declared here, as those programs did: five 32-bit fields,
 * 20 bytes.
 */
#include "pyxdp_bpf.h"

struct bpf_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

/* Packets and bytes, per CPU. */
struct bpf_map_def SEC("maps") legacy_stats = {
	.type = BPF_MAP_TYPE_PERCPU_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 2,
};

/* Packet length -> times seen, without preallocation. */
struct bpf_map_def SEC("maps") legacy_lengths = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 1024,
	.map_flags = BPF_F_NO_PREALLOC,
};

SEC("xdp")
int legacy_prog(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	__u32 key = 0;
	__u64 one = 1, *v;

	v = bpf_map_lookup_elem(&legacy_stats, &key);
	if (v)
		*v += 1;
	key = 1;
	v = bpf_map_lookup_elem(&legacy_stats, &key);
	if (v)
		*v += len;

	v = bpf_map_lookup_elem(&legacy_lengths, &len);
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		bpf_map_update_elem(&legacy_lengths, &len, &one, BPF_NOEXIST);

	return XDP_PASS;
}

LICENSE("GPL");
