// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * chain - five programs for libxdp's dispatcher, each with its own
 * XDP_RUN_CONFIG (priority and chain-call actions), as xdp-loader loads
 * several programs on one interface.
 *
 * Program k counts its runs in hits[k] and returns the byte at offset k of
 * the UDP payload (offset 42 + k of the frame) as its verdict, XDP_PASS when
 * the frame is shorter: so a packet chooses which programs run and where the
 * chain stops, including verdicts that are no XDP action at all (the
 * dispatcher tests 1U << ret, a shift by ret masked to 5 bits). chain_mod
 * also increments payload byte 8 and chain_b shrinks the frame by one byte
 * when payload byte 9 is 0xAA (bpf_xdp_adjust_tail), so later programs and
 * the output frame show what ran before them.
 *
 *   program      k  priority  chain-call actions      section
 *   chain_first  0  10        XDP_PASS, XDP_DROP      xdp
 *   chain_b      1  20        XDP_PASS, XDP_TX        xdp
 *   chain_mod    2  20        XDP_PASS (default)      xdp
 *   chain_frags  3  30        all five actions        xdp.frags
 *   chain_last   4  50        XDP_PASS (no config)    xdp.frags
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

/* libxdp's macro (xdp/xdp_helpers.h): the run config of program f. */
#define XDP_RUN_CONFIG(f) _##f SEC(".xdp_run_config")

#define PAYLOAD (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline int verdict(struct xdp_md *ctx, __u32 k)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *v = data + PAYLOAD + k;
	__u32 key = k; /* k itself stays a constant for the verifier */
	__u64 *n = bpf_map_lookup_elem(&hits, &key);

	if (n)
		__sync_fetch_and_add(n, 1);
	if ((void *)(v + 1) > data_end)
		return XDP_PASS;
	return *v;
}

struct {
	__uint(priority, 10);
	__uint(XDP_PASS, 1);
	__uint(XDP_DROP, 1);
} XDP_RUN_CONFIG(chain_first);

SEC("xdp")
int chain_first(struct xdp_md *ctx)
{
	return verdict(ctx, 0);
}

struct {
	__uint(priority, 20);
	__uint(XDP_TX, 1);
} XDP_RUN_CONFIG(chain_b);

SEC("xdp")
int chain_b(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *flag = data + PAYLOAD + 9;

	if ((void *)(flag + 1) <= data_end && *flag == 0xAA)
		bpf_xdp_adjust_tail(ctx, -1);
	return verdict(ctx, 1);
}

struct {
	__uint(priority, 20);
} XDP_RUN_CONFIG(chain_mod);

SEC("xdp")
int chain_mod(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *b = data + PAYLOAD + 8;

	if ((void *)(b + 1) <= data_end)
		*b += 1;
	return verdict(ctx, 2);
}

struct {
	__uint(priority, 30);
	__uint(XDP_ABORTED, 1);
	__uint(XDP_DROP, 1);
	__uint(XDP_PASS, 1);
	__uint(XDP_TX, 1);
	__uint(XDP_REDIRECT, 1);
} XDP_RUN_CONFIG(chain_frags);

SEC("xdp.frags")
int chain_frags(struct xdp_md *ctx)
{
	return verdict(ctx, 3);
}

SEC("xdp.frags")
int chain_last(struct xdp_md *ctx)
{
	return verdict(ctx, 4);
}

LICENSE("GPL");
