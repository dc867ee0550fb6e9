// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * meta - pass information along with a packet in the XDP metadata area.
 *
 * bpf_xdp_adjust_meta(ctx, -N) grows the metadata area, N bytes just in
 * front of the packet data, from ctx->data_meta to ctx->data (N a multiple
 * of 4, at most 32 in all). Whatever runs later on the same packet can read
 * it: a program the packet is tail-called or redirected to, a TC program
 * (as __sk_buff->data_meta), or an AF_XDP consumer.
 *
 * xdp_meta_producer stores a struct pkt_meta there: a mark (meta_mark from
 * .rodata), a hash of the IPv4/IPv6 addresses and the receive time.
 * xdp_meta_consumer is the reading side: it checks whether a complete
 * struct pkt_meta is present, counts packets with and without one, and
 * keeps the last one seen in last_meta.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

struct pkt_meta {
	__u32 mark;
	__u32 addr_hash;
	__u64 rx_time_ns;
};

/* Value stored in pkt_meta.mark (.rodata, set before loading). */
const volatile __u32 meta_mark = 0x5059u; /* "PY" */

enum {
	SEEN_WITHOUT_META,
	SEEN_WITH_META,
	SEEN_MAX,
};

/* Consumer side: packets seen with and without metadata (per CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, SEEN_MAX);
} meta_seen SEC(".maps");

/* Consumer side: the most recent metadata read. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct pkt_meta);
	__uint(max_entries, 1);
} last_meta SEC(".maps");

/* Fold the source and destination addresses into 32 bits (0 for non-IP). */
static __always_inline __u32 addr_hash(void *data, void *data_end)
{
	struct pyxdp_cursor c = { .pos = data, .end = data_end };
	__be16 proto = pyxdp_parse_eth(&c, NULL);
	__u32 h = 0;

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = pyxdp_parse_ipv4(&c);

		if (iph)
			h = iph->saddr ^ ((iph->daddr << 16) | (iph->daddr >> 16));
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = pyxdp_parse_ipv6(&c);

		if (ip6h) {
#pragma unroll
			for (int i = 0; i < 4; i++)
				h ^= ip6h->saddr.in6_u.u6_addr32[i] ^ ip6h->daddr.in6_u.u6_addr32[i];
		}
	}
	return h;
}

SEC("xdp")
int xdp_meta_producer(struct xdp_md *ctx)
{
	struct pkt_meta *meta;
	void *data;
	__u32 hash;

	/* Hash first: the adjustment invalidates packet pointers anyway. */
	hash = addr_hash((void *)(long)ctx->data, (void *)(long)ctx->data_end);

	/* Not every driver supports metadata: then the packet just goes on
	 * without it. */
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*meta)))
		return XDP_PASS;

	meta = (void *)(long)ctx->data_meta;
	data = (void *)(long)ctx->data;
	/* The verifier only lets us write what is proven to lie between
	 * data_meta and data. */
	if ((void *)(meta + 1) > data)
		return XDP_PASS;

	meta->mark = meta_mark;
	meta->addr_hash = hash;
	meta->rx_time_ns = bpf_ktime_get_ns();
	return XDP_PASS;
}

SEC("xdp")
int xdp_meta_consumer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	struct pkt_meta *meta = (void *)(long)ctx->data_meta;
	__u32 key = SEEN_WITHOUT_META;
	__u32 zero = 0;
	__u64 *n;

	/* Metadata present if a whole struct pkt_meta fits between data_meta
	 * and data (an ordering comparison: that is what gives the verifier
	 * the readable range; "==" would not). */
	if ((void *)(meta + 1) <= data) {
		key = SEEN_WITH_META;
		bpf_map_update_elem(&last_meta, &zero, meta, BPF_ANY);
	}

	n = bpf_map_lookup_elem(&meta_seen, &key);
	if (n)
		*n += 1;
	return XDP_PASS;
}

LICENSE("GPL");
