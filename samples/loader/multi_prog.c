// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * Loader feature test: several XDP programs in one object sharing map and
 * subprograms.
 *
 * What a loader must get right here:
 *   - three programs in the same "xdp" section, told apart by their symbols
 *     (offset and size inside the section);
 *   - BPF-to-BPF calls (call with src_reg = 1, imm = relative offset) from
 *     the programs into ".text", where the static __noinline functions
 *     live; the callees (and their own callees, three levels deep) must be
 *     appended to every program that uses them and the offsets fixed up;
 *   - a global (non-static) function, which the kernel verifies on its own
 *     from its BTF signature: it needs the object's BTF and the func_info
 *     records of .BTF.ext;
 *   - callbacks passed to bpf_loop and bpf_for_each_map_elem: the
 *     function's address is a 64-bit immediate load with src_reg = 4
 *     (BPF_PSEUDO_FUNC) relocated against ".text";
 *   - one map, "counters", referenced from all programs.
 */
#include "pyxdp_bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 8);
} counters SEC(".maps");

/* Add v to counters[idx]. */
static __noinline void counter_add(__u32 idx, __u64 v)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		__sync_fetch_and_add(c, v);
}

/* A three-level call chain: level1 -> level2 -> level3. */
static __noinline __u32 level3(__u32 x)
{
	return x * 3 + 1;
}

static __noinline __u32 level2(__u32 x)
{
	return level3(x) ^ 0x55;
}

static __noinline __u32 level1(__u32 x)
{
	return level2(x + 7) + level3(x);
}

/* Global function: verified independently of its callers, with ctx known
 * as PTR_TO_CTX from the BTF type of its argument. */
__noinline int multi_packet_len(struct xdp_md *ctx)
{
	if (!ctx)
		return 0;
	return ctx->data_end - ctx->data;
}

SEC("xdp")
int multi_first(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;

	counter_add(0, 1);
	counter_add(1, level1(len));
	return XDP_PASS;
}

SEC("xdp")
int multi_second(struct xdp_md *ctx)
{
	int len = multi_packet_len(ctx);

	counter_add(2, level2((__u32)len));
	return len > 0 ? XDP_PASS : XDP_DROP;
}

struct loop_ctx {
	__u64 sum;
	__u32 limit;
};

/* bpf_loop callback: returns 0 to continue, 1 to stop. */
static int loop_step(__u32 index, void *data)
{
	struct loop_ctx *lc = data;

	lc->sum += index;
	return index + 1 >= lc->limit;
}

/* bpf_for_each_map_elem callback: adds up every counter. */
static __u64 sum_counter(void *map, __u32 *key, __u64 *value, void *data)
{
	struct loop_ctx *lc = data;

	lc->sum += *value;
	return 0; /* continue */
}

SEC("xdp")
int multi_loop(struct xdp_md *ctx)
{
	struct loop_ctx lc = { .sum = 0, .limit = 10 };
	long iterations;

	iterations = bpf_loop(100, loop_step, &lc, 0);
	counter_add(3, lc.sum);           /* 0 + 1 + ... + 9 = 45 */
	counter_add(4, iterations);       /* 10 */

	lc.sum = 0;
	bpf_for_each_map_elem(&counters, sum_counter, &lc, 0);
	counter_add(5, lc.sum);
	return XDP_PASS;
}

LICENSE("GPL");
